// Package messaging defines the integration-event envelope, the AMQP topology and the consumers, and
// runs an outbox relay's forwarders (messaging.Relay, implemented by platform/outbox) beside them.
package messaging

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/correlation"
	"github.com/keelson/keelson/platform/tenancy"
)

// Event is the envelope of every integration event a module publishes.
type Event struct {
	ID            string    `json:"id"`
	Type          string    `json:"type"`
	Source        string    `json:"source"`
	OccurredAt    time.Time `json:"occurred_at"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	// TenantID is the tenant the event belongs to; its consumers run acting for it.
	TenantID uuid.UUID       `json:"tenant_id"`
	Payload  json.RawMessage `json:"payload"`

	span trace.SpanContext // see InTraceOf; zero: the trace of the context it is published in
}

// InTraceOf returns e continuing the trace of ctx's span, whatever context it is then published in:
// for a unit of work that writes the events of many callers at once, each in its caller's trace.
func (e Event) InTraceOf(ctx context.Context) Event {
	e.span = trace.SpanContextFromContext(ctx)
	return e
}

// NewEvent builds an event with a fresh UUID v7 and the correlation id and tenant carried by ctx.
// Code in a system context sets TenantID itself: every event belongs to one tenant.
func NewEvent(ctx context.Context, source, eventType string, payload any) (Event, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Event{}, fmt.Errorf("event id: %w", err)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return Event{}, fmt.Errorf("event %s payload: %w", eventType, err)
	}
	tenant, _ := tenancy.From(ctx)
	return Event{
		ID:            id.String(),
		Type:          eventType,
		Source:        source,
		OccurredAt:    time.Now().UTC().Truncate(time.Microsecond),
		CorrelationID: correlation.ID(ctx),
		TenantID:      tenant,
		Payload:       raw,
	}, nil
}

// Decode unmarshals the payload into v.
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return fmt.Errorf("event %s %s: decode payload: %w", e.Type, e.ID, err)
	}
	return nil
}

// Handler handles one event. Delivery is at least once: handlers must be idempotent
// (the Inbox, a claim token or a unique key). A returned error retries, then dead-letters.
type Handler func(ctx context.Context, e Event) error

// Subscription binds a named consumer to event types. Replicas of one consumer compete for messages;
// two consumers each get every matching event.
type Subscription struct {
	Consumer   string
	EventTypes []string
	Handle     Handler
	// Concurrency is how many messages of this consumer one replica handles at once, each with its
	// own ack, retries and dead-lettering; order between them is not kept, and two copies of one
	// event still run one after the other. 0 means 1.
	Concurrency int
}
