package messaging

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	sub     *drainingSubscriber
	stopped chan struct{} // closed by Close: ends the subscriber's idle wait (idleUntilCommit)
}

// Close stops the forwarder and returns once its outbox transaction has ended. The subscriber is
// closed first: watermill's router closes a handler's subscriber itself only when, of the two
// signals it waits on at close, it happens to pick "router closing" over "context cancelled";
// otherwise it waits for a message channel that our subscribers (which ignore the context by
// design) never close, until its CloseTimeout, and fails with "router close timeout".
func (f outboxForwarder) Close() error {
	close(f.stopped)
	subErr := f.sub.Close()
	return errors.Join(f.Forwarder.Close(), subErr)
}

// newForwarders builds cfg.Forwarders watermill forwarders over the outbox, publishing to RabbitMQ
// through out. They take disjoint rows (SKIP LOCKED), so they forward in parallel.
func newForwarders(cfg Config, db *database.DB, out message.Publisher, logger watermill.LoggerAdapter) ([]outboxForwarder, error) {
	ackDeadline := 30 * time.Second
	fwds := make([]outboxForwarder, 0, cfg.Forwarders)
	for range cfg.Forwarders {
		stopped, read := make(chan struct{}), &atomic.Int64{}
		beginner := gatedBeginner{Beginner: wmsql.BeginnerFromStdSQL(db.SQL()), timeout: cfg.PublishTimeout}
		sub, err := wmsql.NewSubscriber(beginner, wmsql.SubscriberConfig{
			SchemaAdapter:  newOutboxSchema(cfg.ForwardBatchSize, read),
			OffsetsAdapter: newOutboxOffsets(),
			PollInterval:   cfg.PollInterval,
			BackoffManager: idleUntilCommit{poll: cfg.PollInterval, wake: wakeOf(db), stopped: stopped,
				read: read, batch: cfg.ForwardBatchSize, BackoffManager: wmsql.NewDefaultBackoffManager(cfg.PollInterval, time.Second)},
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
		fwds = append(fwds, outboxForwarder{Forwarder: fwd, sub: drained, stopped: stopped})
	}
	return fwds, nil
}

// commitWakes holds, per database, what wakes an idle forwarder of this process over it: one pending
// wake is enough, as the poll it starts comes after every commit that found it pending.
var commitWakes sync.Map // *database.DB → chan struct{}

func wakeOf(db *database.DB) chan struct{} {
	if ch, ok := commitWakes.Load(db); ok {
		return ch.(chan struct{})
	}
	ch, _ := commitWakes.LoadOrStore(db, make(chan struct{}, 1))
	return ch.(chan struct{})
}

// OutboxCommitted tells this process's forwarders over db that outbox rows committed, so an idle one
// polls at once instead of at its next PollInterval; platform/outbox calls it after the commit. It
// never blocks.
func OutboxCommitted(db *database.DB) {
	select {
	case wakeOf(db) <- struct{}{}:
	default:
	}
}

// idleUntilCommit is the outbox subscriber's backoff: after a poll that found no row, or less than a
// full batch (the outbox was empty behind them), the forwarder waits for a commit of this process that
// wrote outbox rows, or PollInterval for those written by other processes. A commit during the poll
// left a wake behind it, so no row waits longer. Only after a full batch does it poll again at once.
// Errors back off as watermill's default does.
type idleUntilCommit struct {
	wmsql.BackoffManager
	poll    time.Duration
	wake    <-chan struct{}
	stopped <-chan struct{}
	read    *atomic.Int64 // rows the last poll read (outboxSchema)
	batch   int
}

func (b idleUntilCommit) HandleError(logger watermill.LoggerAdapter, noMsg bool, err error) time.Duration {
	if err != nil || (!noMsg && b.read.Load() >= int64(b.batch)) {
		return b.BackoffManager.HandleError(logger, noMsg, err)
	}
	t := time.NewTimer(b.poll)
	defer t.Stop()
	select {
	case <-b.wake:
	case <-t.C:
	case <-b.stopped:
	}
	return 0
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
