package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/messaging"
)

// Relay forwards the outbox to RabbitMQ: the messaging Bus runs its forwarders (it implements
// messaging.Relay). A Publisher given the relay wakes it after each commit. It does not connect
// until the Bus runs it.
type Relay struct {
	db *database.DB
	// wake holds one pending wake for an idle forwarder: the poll it starts comes after every commit
	// that found it pending, so one is enough.
	wake chan struct{}
}

// NewRelay returns the relay over db's outbox.
func NewRelay(db *database.DB) (*Relay, error) {
	if db == nil {
		return nil, errors.New("outbox: nil database")
	}
	return &Relay{db: db, wake: make(chan struct{}, 1)}, nil
}

// Wake tells the relay's forwarders that outbox rows committed, so an idle one polls at once instead
// of at its next PollInterval. It never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Backlog counts the outbox rows: with delete-on-ack, each is an event not yet confirmed by RabbitMQ.
func (r *Relay) Backlog(ctx context.Context) (int64, error) {
	var n int64
	err := r.db.Gorm().WithContext(ctx).Raw(`SELECT count(*) FROM ` + Table).Scan(&n).Error
	return n, err
}

// Forwarders builds o.Count watermill forwarders over the outbox, publishing through o.Out. They
// take disjoint rows (SKIP LOCKED), so they forward in parallel.
func (r *Relay) Forwarders(o messaging.ForwardOptions) ([]messaging.Forwarder, error) {
	ackDeadline := 30 * time.Second
	fwds := make([]messaging.Forwarder, 0, o.Count)
	for range o.Count {
		stopped, read := make(chan struct{}), &atomic.Int64{}
		beginner := gatedBeginner{Beginner: wmsql.BeginnerFromStdSQL(r.db.SQL()), timeout: o.PublishTimeout}
		sub, err := wmsql.NewSubscriber(beginner, wmsql.SubscriberConfig{
			SchemaAdapter:  newOutboxSchema(o.BatchSize, read),
			OffsetsAdapter: newOutboxOffsets(),
			PollInterval:   o.PollInterval,
			BackoffManager: idleUntilCommit{poll: o.PollInterval, wake: r.wake, stopped: stopped,
				read: read, batch: o.BatchSize, BackoffManager: wmsql.NewDefaultBackoffManager(o.PollInterval, time.Second)},
			// A failed publish (broker down) is retried on this beat, row lock held, until AckDeadline.
			ResendInterval: 500 * time.Millisecond,
			RetryInterval:  time.Second,
			AckDeadline:    &ackDeadline,
		}, o.Logger)
		if err != nil {
			return nil, fmt.Errorf("outbox subscriber: %w", err)
		}
		drained := newDrainingSubscriber(sub, o.PublishTimeout+time.Second)
		fwd, err := forwarder.NewForwarder(drained, o.Out, o.Logger, forwarder.Config{
			ForwarderTopic: Topic,
			CloseTimeout:   o.CloseTimeout,
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

// idleUntilCommit is the outbox subscriber's backoff: after a poll that found no row, or less than a
// full batch (the outbox was empty behind them), the forwarder waits for a wake (a commit through a
// Publisher given the relay), or PollInterval for rows written by other processes. A commit during
// the poll left a wake behind it, so no row waits longer. Only after a full batch does it poll again
// at once. Errors back off as watermill's default does.
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
