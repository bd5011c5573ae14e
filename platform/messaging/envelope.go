package messaging

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/telemetry"
	"github.com/keelson/keelson/platform/tenancy"
)

// Metadata keys of an event on the wire. They travel as AMQP headers; the event id is also the
// AMQP message id and the watermill message UUID, which is what consumers deduplicate on.
const (
	HeaderEventID       = "event_id"
	HeaderEventType     = "event_type"
	HeaderEventSource   = "event_source"
	HeaderOccurredAt    = "occurred_at"
	HeaderCorrelationID = "correlation_id"
	HeaderTenantID      = "tenant_id"
)

// errUndecodable marks a message that can never be turned into an Event: retrying cannot help.
var errUndecodable = errors.New("undecodable event message")

// EventMessage turns an event into the watermill message the outbox stores and the forwarder relays.
// The message carries ctx, so the outbox INSERT runs in the transaction and deadline of ctx.
func EventMessage(ctx context.Context, e Event) (*message.Message, error) {
	if e.ID == "" || e.Type == "" || e.Source == "" || e.OccurredAt.IsZero() {
		return nil, fmt.Errorf("event %q of type %q: id, type, source and occurred_at are required", e.ID, e.Type)
	}
	if e.TenantID == uuid.Nil {
		return nil, fmt.Errorf("event %s %s: %w: set its TenantID", e.Type, e.ID, tenancy.ErrNoTenant)
	}
	if len(e.Payload) == 0 {
		return nil, fmt.Errorf("event %s %s: empty payload", e.Type, e.ID)
	}
	msg := message.NewMessage(e.ID, message.Payload(e.Payload))
	msg.Metadata.Set(HeaderEventID, e.ID)
	msg.Metadata.Set(HeaderEventType, e.Type)
	msg.Metadata.Set(HeaderEventSource, e.Source)
	msg.Metadata.Set(HeaderOccurredAt, e.OccurredAt.UTC().Format(time.RFC3339Nano))
	msg.Metadata.Set(HeaderTenantID, e.TenantID.String())
	if e.CorrelationID != "" {
		msg.Metadata.Set(HeaderCorrelationID, e.CorrelationID)
	}
	// The trace context travels with the outbox row and then as AMQP headers (traceparent), so the
	// consumers' spans join the trace of the request that published the event.
	traced := ctx
	if e.span.IsValid() {
		traced = trace.ContextWithSpanContext(ctx, e.span)
	}
	telemetry.Inject(traced, msg.Metadata)
	msg.SetContext(ctx)
	return msg, nil
}

// eventFromMessage rebuilds the event a consumer handles from a delivered message.
func eventFromMessage(msg *message.Message) (Event, error) {
	id := msg.UUID
	if id == "" {
		id = msg.Metadata.Get(HeaderEventID)
	}
	occurredAt, err := time.Parse(time.RFC3339Nano, msg.Metadata.Get(HeaderOccurredAt))
	if err != nil {
		return Event{}, fmt.Errorf("%w %s: occurred_at: %w", errUndecodable, id, err)
	}
	// Messages relayed before events carried a tenant belong to the default tenant, as their rows do.
	tenant := tenancy.DefaultID
	if raw := msg.Metadata.Get(HeaderTenantID); raw != "" {
		if tenant, err = uuid.Parse(raw); err != nil || tenant == uuid.Nil {
			return Event{}, fmt.Errorf("%w %s: tenant_id %q", errUndecodable, id, raw)
		}
	}
	e := Event{
		ID:            id,
		Type:          msg.Metadata.Get(HeaderEventType),
		Source:        msg.Metadata.Get(HeaderEventSource),
		OccurredAt:    occurredAt,
		CorrelationID: msg.Metadata.Get(HeaderCorrelationID),
		TenantID:      tenant,
		Payload:       append([]byte(nil), msg.Payload...),
	}
	if e.ID == "" || e.Type == "" {
		return Event{}, fmt.Errorf("%w: missing event id or type", errUndecodable)
	}
	return e, nil
}
