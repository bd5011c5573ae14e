package webhooks

import (
	"context"
	"fmt"

	"github.com/keelson/keelson/modules/webhooks/internal/queries"
	"github.com/keelson/keelson/platform/tenancy"
)

// CodeEventIDReused is the 409 of a POST /events whose id is stored with another type or data.
const CodeEventIDReused = "event_id_reused"

// sameEvent compares a stored event with ev as PostgreSQL sees them: data as jsonb, so key order and
// whitespace do not matter.
func (s store) sameEvent(ctx context.Context, ev *eventRecord) (bool, error) {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return false, err
	}
	var same bool
	q := queries.SameEvent{Tenant: tenant, ID: ev.ID, Type: ev.Type, Data: string(ev.Data)}
	err = s.conn(ctx).Raw(q.SQL(), q.Args()...).Row().Scan(&same)
	if err != nil {
		return false, fmt.Errorf("compare event %s: %w", ev.ID, err)
	}
	return same, nil
}
