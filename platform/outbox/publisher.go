// Package outbox writes integration events into the transactional outbox of the unit of work in
// the context; platform/messaging forwards them to RabbitMQ after commit.
package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/messaging"
)

// ErrNoTransaction is returned by Publish outside a unit of work: writing through the pool would
// commit the event on its own, whether or not the business writes it announces commit.
var ErrNoTransaction = errors.New("outbox: publish requires a unit of work (database.WithTx) in the context")

// Publisher writes events into the outbox inside the caller's transaction. It implements
// module.EventPublisher. Safe for concurrent use.
type Publisher struct {
	db     *database.DB
	tracer trace.Tracer // nil: no span
}

// Trace records an "outbox publish" span per Publish; call it before use.
func (p *Publisher) Trace(tp trace.TracerProvider) {
	p.tracer = tp.Tracer("github.com/keelson/keelson/platform/outbox")
}

// NewPublisher returns a publisher writing through db's units of work.
func NewPublisher(db *database.DB) (*Publisher, error) {
	if db == nil {
		return nil, errors.New("outbox: nil database")
	}
	return &Publisher{db: db}, nil
}

// Publish stores events in the outbox of the transaction carried by ctx. They reach RabbitMQ only
// if that transaction commits, and are never seen if it rolls back.
func (p *Publisher) Publish(ctx context.Context, events ...messaging.Event) error {
	tx, ok := database.TxFromContext(ctx)
	if !ok {
		return ErrNoTransaction
	}
	if len(events) == 0 {
		return nil
	}
	if p.tracer != nil {
		var span trace.Span
		ctx, span = p.tracer.Start(ctx, "outbox publish", trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.Int("messaging.batch.message_count", len(events)),
				attribute.String("keelson.event.type", events[0].Type)))
		defer span.End()
	}
	exec, err := txExecutor(tx)
	if err != nil {
		return err
	}
	writer, err := messaging.NewOutboxWriter(exec)
	if err != nil {
		return err
	}
	// One multi-row INSERT per event type: a fan-out of N deliveries is one statement, not N.
	var types []string
	byType := map[string][]*message.Message{}
	for _, e := range events {
		msg, err := messaging.EventMessage(ctx, e)
		if err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		if _, seen := byType[e.Type]; !seen {
			types = append(types, e.Type)
		}
		byType[e.Type] = append(byType[e.Type], msg)
	}
	for _, t := range types {
		if err := writer.Publish(t, byType[t]...); err != nil {
			return fmt.Errorf("outbox: write %d %s events: %w", len(byType[t]), t, err)
		}
	}
	database.AfterCommit(ctx, func() { messaging.OutboxCommitted(p.db) }) // an idle forwarder of this process forwards them at once
	return nil
}
