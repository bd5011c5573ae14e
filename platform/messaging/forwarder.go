package messaging

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/keelson/keelson/platform/database"
)

// outboxForwarder is one watermill forwarder and its outbox subscriber. Closing the forwarder
// does not wait for the subscriber, whose last transaction must end before the publisher closes.
type outboxForwarder struct {
	*forwarder.Forwarder
	sub *drainingSubscriber
}

// Close stops the forwarder and returns once its outbox transaction has ended. The subscriber is
// closed first: watermill's router closes a handler's subscriber itself only when, of the two
// signals it waits on at close, it happens to pick "router closing" over "context cancelled";
// otherwise it waits for a message channel that our subscribers (which ignore the context by
// design) never close, until its CloseTimeout, and fails with "router close timeout".
func (f outboxForwarder) Close() error {
	subErr := f.sub.Close()
	return errors.Join(f.Forwarder.Close(), subErr)
}

// newForwarders builds cfg.Forwarders watermill forwarders over the outbox, publishing to RabbitMQ
// through out. They take disjoint rows (SKIP LOCKED), so they forward in parallel.
func newForwarders(cfg Config, db *database.DB, out message.Publisher, logger watermill.LoggerAdapter) ([]outboxForwarder, error) {
	ackDeadline := 30 * time.Second
	fwds := make([]outboxForwarder, 0, cfg.Forwarders)
	for range cfg.Forwarders {
		beginner := gatedBeginner{Beginner: wmsql.BeginnerFromStdSQL(db.SQL()), timeout: cfg.PublishTimeout}
		sub, err := wmsql.NewSubscriber(beginner, wmsql.SubscriberConfig{
			SchemaAdapter:  newOutboxSchema(cfg.ForwardBatchSize),
			OffsetsAdapter: newOutboxOffsets(),
			PollInterval:   cfg.PollInterval,
			// A failed publish (broker down) is retried on this beat, row lock held, until AckDeadline.
			ResendInterval: 500 * time.Millisecond,
			RetryInterval:  time.Second,
			AckDeadline:    &ackDeadline,
		}, logger)
		if err != nil {
			return nil, fmt.Errorf("outbox subscriber: %w", err)
		}
		drained := newDrainingSubscriber(sub, cfg.PublishTimeout+time.Second)
		fwd, err := forwarder.NewForwarder(drained, out, logger, forwarder.Config{
			ForwarderTopic: OutboxTopic,
			CloseTimeout:   cfg.ShutdownTimeout,
			// Never ack what cannot be unwrapped: such a row stays and shows in the backlog gauge.
			AckWhenCannotUnwrap: false,
		})
		if err != nil {
			return nil, fmt.Errorf("forwarder: %w", err)
		}
		fwds = append(fwds, outboxForwarder{Forwarder: fwd, sub: drained})
	}
	return fwds, nil
}

// observeForward records the forward latency of a confirmed event.
func (m *metrics) observeForward(msg *message.Message) {
	m.forwarded.Inc()
	if at, err := time.Parse(time.RFC3339Nano, msg.Metadata.Get(HeaderOccurredAt)); err == nil {
		m.forwardDelay.Observe(time.Since(at).Seconds())
	}
}

// sampleBacklog refreshes the backlog gauge until ctx is done. With delete-on-ack, every row in
// the outbox is one not yet confirmed by RabbitMQ.
func sampleBacklog(ctx context.Context, db *database.DB, every time.Duration, m *metrics) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var n int64
		if err := db.Gorm().WithContext(ctx).Raw(`SELECT count(*) FROM ` + OutboxTable).Scan(&n).Error; err == nil {
			m.backlog.Set(float64(n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
