// Package outbox is the transactional outbox, both ends of it: Publisher writes integration events
// in the transaction of the unit of work in the context, and Relay forwards the committed ones to
// RabbitMQ, run by the messaging Bus. A Publisher is given the relay of its process at construction
// and wakes it after each commit; nothing finds a relay any other way.
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
	relay  *Relay       // woken after each commit; nil in a process that runs none
	tracer trace.Tracer // nil: no span
}

// Trace records an "outbox publish" span per Publish; call it before use.
func (p *Publisher) Trace(tp trace.TracerProvider) {
	p.tracer = tp.Tracer("github.com/keelson/keelson/platform/outbox")
}

// NewPublisher returns a publisher writing through db's units of work that wakes relay after each
// commit, so an idle forwarder of this process forwards at once. relay is nil in a process that runs
// none (a command, a test without a bus): a replica's relay then finds the rows at its next poll.
func NewPublisher(db *database.DB, relay *Relay) (*Publisher, error) {
	if db == nil {
		return nil, errors.New("outbox: nil database")
	}
	if relay != nil && relay.db != db {
		return nil, errors.New("outbox: the relay forwards from another database")
	}
	return &Publisher{db: db, relay: relay}, nil
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
	writer, err := newWriter(exec)
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
	if p.relay != nil {
		database.AfterCommit(ctx, p.relay.Wake)
	}
	return nil
}
