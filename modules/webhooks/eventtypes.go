package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/keelson/keelson/modules/webhooks/internal/eventtype"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/module"
)

// eventTypeResponse is one public event of the catalog, as GET /event-types lists it.
type eventTypeResponse struct {
	Type        string          `json:"type"`
	Description string          `json:"description"`
	Owner       string          `json:"owner"`
	Schema      json.RawMessage `json:"schema"`
	Example     any             `json:"example"`
}

type eventTypeCursor struct {
	After string `json:"after"`
}

func (h handlers) listEventTypes(_ context.Context, in *listIn) (*listOut[eventTypeResponse], error) {
	entries, next, err := httpapi.Paginate(in.Page, h.s.eventTypes,
		func(last module.CatalogEntry) eventTypeCursor { return eventTypeCursor{After: last.Type} })
	if err != nil {
		return nil, err
	}
	items := make([]eventTypeResponse, len(entries))
	for i, e := range entries {
		items[i] = eventTypeResponse{Type: e.Type, Description: e.Description, Owner: e.Owner, Schema: e.Schema, Example: e.Example}
	}
	return &listOut[eventTypeResponse]{Body: httpapi.NewList(items, next)}, nil
}

// eventTypes returns up to limit catalog entries ordered by type, after the given one.
func (s *Service) eventTypes(cur eventTypeCursor, limit int) ([]module.CatalogEntry, error) {
	entries := s.catalog.Entries()
	from := sort.Search(len(entries), func(i int) bool { return entries[i].Type > cur.After })
	entries = entries[from:]
	return entries[:min(limit, len(entries))], nil
}

// patternWarnings names the patterns no catalogued event type matches. They are accepted: clients
// post their own types to /events, and a module added later may declare a matching one.
func (s *Service) patternWarnings(patterns []string) []string {
	types := s.catalog.Types()
	var warnings []string
	for _, p := range patterns {
		matched := p == "*"
		for _, t := range types {
			matched = matched || eventtype.Matches(p, t)
		}
		if !matched {
			warnings = append(warnings, fmt.Sprintf("pattern %q matches no event type a module publishes: "+
				"it receives only events posted to /webhooks/events, until a module declares a matching type", p))
		}
	}
	return warnings
}
