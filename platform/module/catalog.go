package module

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"github.com/keelson/keelson/platform/httpapi"
)

// EventType declares one public integration event of a module: webhook subscribers may receive it.
// A module's contract package lists them; declaring one is one line.
type EventType struct {
	Type        string // dotted name, first segment the module's name or its singular ("note.created")
	Description string // one line, shown in GET /webhooks/event-types and the OpenAPI document
	Example     any    // a value of the payload type: its Go type gives the JSON Schema, the value the example
}

// CatalogEntry is a declared event with its owner and generated JSON Schema.
type CatalogEntry struct {
	Type        string
	Description string
	Owner       string // module name
	Example     any
	Payload     reflect.Type
	Schema      json.RawMessage // standalone JSON Schema 2020-12 of the payload
}

// Catalog is every public integration event of the modules of a replica, filled while modules
// register and read after start.
type Catalog struct {
	mu      sync.RWMutex
	entries map[string]CatalogEntry
	owners  map[string]string // type namespace (first segment) → module declaring events in it
	errs    []error
}

func newCatalog() *Catalog {
	return &Catalog{entries: map[string]CatalogEntry{}, owners: map[string]string{}}
}

var eventTypeName = regexp.MustCompile(`^[a-z0-9_-]+(\.[a-z0-9_-]+)+$`)

// namespaces are the first segments a module may use: its name and its singular.
func namespaces(module string) []string {
	if s, ok := strings.CutSuffix(module, "s"); ok && s != "" {
		return []string{module, s}
	}
	return []string{module}
}

func (c *Catalog) add(owner string, e EventType) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(format string, args ...any) {
		c.errs = append(c.errs, fmt.Errorf("module %s: event type %q: %s", owner, e.Type, fmt.Sprintf(format, args...)))
	}
	if !eventTypeName.MatchString(e.Type) {
		fail("must be lower-case dotted segments of letters, digits, \"_\" or \"-\" (at least two)")
		return
	}
	ns, _, _ := strings.Cut(e.Type, ".")
	allowed := namespaces(owner)
	if !containsString(allowed, ns) {
		fail("is outside the module's prefix: it must start with \"%s.\"", strings.Join(allowed, `." or "`))
		return
	}
	if prev, dup := c.entries[e.Type]; dup {
		fail("is already declared by module %s", prev.Owner)
		return
	}
	if strings.TrimSpace(e.Description) == "" || strings.Contains(e.Description, "\n") {
		fail("needs a one-line description")
		return
	}
	if e.Example == nil {
		fail("needs an example payload value")
		return
	}
	schema, err := payloadSchema(reflect.TypeOf(e.Example))
	if err != nil {
		fail("payload schema: %v", err)
		return
	}
	c.entries[e.Type] = CatalogEntry{Type: e.Type, Description: e.Description, Owner: owner, Example: e.Example,
		Payload: reflect.TypeOf(e.Example), Schema: schema}
	for _, n := range allowed {
		c.owners[n] = owner
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// payloadSchema is the standalone schema of t, named types under $defs. Payload objects accept
// properties they do not list: adding a field to an event is not a breaking change.
func payloadSchema(t reflect.Type) (json.RawMessage, error) {
	reg := huma.NewMapRegistry("#/$defs/", huma.DefaultSchemaNamer)
	root := reg.Schema(t, false, "")
	defs := reg.Map()
	delete(defs, huma.DefaultSchemaNamer(t, "")) // inlined as the root
	for _, s := range defs {
		openObjects(s)
	}
	openObjects(root)
	doc := map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema"}
	raw, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if len(defs) > 0 {
		doc["$defs"] = defs
	}
	return json.Marshal(doc)
}

// openObjects drops huma's additionalProperties:false, which suits request bodies, not events.
func openObjects(s *huma.Schema) {
	if s == nil {
		return
	}
	if b, ok := s.AdditionalProperties.(bool); ok && !b {
		s.AdditionalProperties = nil
	}
	for _, p := range s.Properties {
		openObjects(p)
	}
	openObjects(s.Items)
}

// Err reports every declaration the catalog refused: a start with any of them must fail.
func (c *Catalog) Err() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return errors.Join(c.errs...)
}

// Entries returns the catalog ordered by type.
func (c *Catalog) Entries() []CatalogEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]CatalogEntry, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// Docs returns the catalog as the OpenAPI document's "webhooks" section describes it.
func (c *Catalog) Docs() []httpapi.EventDoc {
	entries := c.Entries()
	out := make([]httpapi.EventDoc, len(entries))
	for i, e := range entries {
		out[i] = httpapi.EventDoc{Type: e.Type, Description: e.Description, Payload: e.Payload, Example: e.Example}
	}
	return out
}

// Types returns the declared event types, ordered.
func (c *Catalog) Types() []string {
	entries := c.Entries()
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Type
	}
	return out
}

// Owner returns the module owning eventType: the declaring module, or the module whose namespace
// (first segment) it is in. Clients may not publish events in a module's namespace.
func (c *Catalog) Owner(eventType string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e, ok := c.entries[eventType]; ok {
		return e.Owner, true
	}
	ns, _, _ := strings.Cut(eventType, ".")
	owner, ok := c.owners[ns]
	return owner, ok
}
