package messaging_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

// barrier releases its waiters once n of them wait at the same time; a waiter gives up after timeout.
type barrier struct {
	n    int
	mu   sync.Mutex
	in   int
	open chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

// wait reports whether the barrier opened while this caller waited.
func (b *barrier) wait(timeout time.Duration) bool {
	b.mu.Lock()
	b.in++
	if b.in == b.n {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
		return true
	case <-time.After(timeout):
		b.mu.Lock()
		defer b.mu.Unlock()
		b.in--
		select {
		case <-b.open: // opened in the meantime
			return true
		default:
			return false
		}
	}
}

// inFlight tracks how many handlers run at once and the most seen.
type inFlight struct {
	mu        sync.Mutex
	now, peak int
}

func (f *inFlight) enter() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now++
	f.peak = max(f.peak, f.now)
}

func (f *inFlight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now--
}

func (f *inFlight) max() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak
}

// With Concurrency 4 one replica runs 4 handlers of a consumer at once (a barrier that needs 4
// concurrent handlers opens) and never more; with the default, never more than one at a time.
func TestConcurrencyBoundsHandlersInFlight(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "wide", "narrow")

	wideBarrier, narrowBarrier := newBarrier(4), newBarrier(2)
	var wide, narrow inFlight
	var mu sync.Mutex
	wideTimedOut := 0
	wideDone, narrowDone := newCollector(), newCollector()
	bus := startBus(t, cfg, relay,
		messaging.Subscription{Consumer: "wide", EventTypes: []string{"test.wide"}, Concurrency: 4,
			Handle: func(ctx context.Context, e messaging.Event) error {
				wide.enter()
				defer wide.leave()
				if !wideBarrier.wait(20 * time.Second) {
					mu.Lock()
					wideTimedOut++
					mu.Unlock()
				}
				return wideDone.handle(ctx, e)
			}},
		messaging.Subscription{Consumer: "narrow", EventTypes: []string{"test.narrow"},
			Handle: func(ctx context.Context, e messaging.Event) error {
				narrow.enter()
				defer narrow.leave()
				// Holds each message long enough that a second concurrent handler would be seen.
				if narrowBarrier.wait(100 * time.Millisecond) {
					t.Errorf("two handlers of a default consumer ran at once")
				}
				return narrowDone.handle(ctx, e)
			}},
	)

	var wideIDs, narrowIDs []string
	for i := range 12 {
		wideIDs = append(wideIDs, publishOne(t, db, pub, "test.wide", map[string]int{"i": i}, true).ID)
	}
	for i := range 8 {
		narrowIDs = append(narrowIDs, publishOne(t, db, pub, "test.narrow", map[string]int{"i": i}, true).ID)
	}
	waitFor(t, 60*time.Second, "every message handled", func() bool { return wideDone.has(wideIDs) && narrowDone.has(narrowIDs) })

	mu.Lock()
	timedOut := wideTimedOut
	mu.Unlock()
	if timedOut != 0 {
		t.Errorf("%d wide handlers waited 20s for 4 concurrent handlers", timedOut)
	}
	if got := wide.max(); got != 4 {
		t.Errorf("wide consumer ran %d handlers at once, want exactly 4", got)
	}
	if got := narrow.max(); got != 1 {
		t.Errorf("default consumer ran %d handlers at once, want 1", got)
	}
	waitFor(t, 30*time.Second, "handled metrics", func() bool {
		return bus.counter(t, "keelson_messages_handled_total", "wide") >= 12 &&
			bus.counter(t, "keelson_messages_handled_total", "narrow") >= 8
	})
}

// With Concurrency > 1 every failing message still gets 1 + MaxRetries attempts and lands in the
// dead-letter queue once, while the good messages of the same consumer are handled.
func TestConcurrentConsumerDeadLetters(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "mixed")
	cfg.MaxRetries = 2

	firstAttempts := newBarrier(4)
	var overlapped inFlight
	var mu sync.Mutex
	attempts := map[string]int{}
	ok := newCollector()
	handle := func(ctx context.Context, e messaging.Event) error {
		overlapped.enter()
		defer overlapped.leave()
		var p struct{ Fail bool }
		if err := e.Decode(&p); err != nil {
			return err
		}
		if !p.Fail {
			return ok.handle(ctx, e)
		}
		mu.Lock()
		attempts[e.ID]++
		first := attempts[e.ID] == 1
		mu.Unlock()
		if first {
			firstAttempts.wait(10 * time.Second) // the failing messages are in flight together
		}
		return errors.New("always fails")
	}
	bus := startBus(t, cfg, relay, messaging.Subscription{
		Consumer: "mixed", EventTypes: []string{"test.mixed"}, Concurrency: 4, Handle: handle})

	failing := map[string]messaging.Event{}
	var good []string
	for i := range 6 {
		e := publishOne(t, db, pub, "test.mixed", map[string]bool{"fail": true}, true)
		failing[e.ID] = e
		good = append(good, publishOne(t, db, pub, "test.mixed", map[string]int{"i": i}, true).ID)
	}

	dead := readQueue(t, cfg.QueuePrefix+".mixed.dead", len(failing))
	waitFor(t, 30*time.Second, "the good messages", func() bool { return ok.has(good) })
	for _, d := range dead {
		e, found := failing[d.MessageId]
		if !found {
			t.Errorf("dead-lettered %s, which was not a failing message", d.MessageId)
			continue
		}
		assertDead(t, d, e, "mixed", "always fails")
		delete(failing, d.MessageId)
	}
	if len(failing) != 0 {
		t.Errorf("%d failing messages not dead-lettered (or dead-lettered twice)", len(failing))
	}
	mu.Lock()
	for id, n := range attempts {
		if n != 3 {
			t.Errorf("message %s attempted %d times, want 3 (1 + MaxRetries)", id, n)
		}
	}
	mu.Unlock()
	if got := overlapped.max(); got < 2 || got > 4 {
		t.Errorf("%d handlers at once, want 2..4", got)
	}
	waitFor(t, 30*time.Second, "metrics", func() bool {
		return bus.counter(t, "keelson_messages_dead_lettered_total", "mixed") == 6 &&
			bus.counter(t, "keelson_messages_handled_total", "mixed") == 6 &&
			bus.counter(t, "keelson_messages_failed_total", "mixed") == 18
	})
	if n := queueDepth(t, cfg.QueuePrefix+".mixed.dead"); n != 0 {
		t.Errorf("dead-letter queue holds %d more messages, want 0", n)
	}
}

// On stop, a consumer with Concurrency > 1 lets every in-flight handler that finishes within the
// grace period ack, and returns the messages of the others to the queue.
func TestConcurrentConsumerGracefulShutdown(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "slow")
	cfg.ShutdownTimeout = 3 * time.Second // ten times the quick handlers' 300 ms, however loaded the machine

	var started inFlight
	finished := make(chan error, 8)
	slow := func(ctx context.Context, e messaging.Event) error {
		var p struct{ Wait string }
		if err := e.Decode(&p); err != nil {
			return err
		}
		wait, err := time.ParseDuration(p.Wait)
		if err != nil {
			return err
		}
		started.enter()
		select {
		case <-time.After(wait):
			finished <- nil
			return nil
		case <-ctx.Done():
			finished <- ctx.Err()
			return ctx.Err()
		}
	}
	bus := startBus(t, cfg, relay, messaging.Subscription{
		Consumer: "slow", EventTypes: []string{"test.slow"}, Concurrency: 4, Handle: slow})
	for _, wait := range []string{"300ms", "1h", "300ms", "1h"} {
		publishOne(t, db, pub, "test.slow", map[string]string{"wait": wait}, true)
	}
	waitFor(t, 30*time.Second, "4 handlers in flight", func() bool { return started.max() == 4 })
	bus.stop(t)

	var completed, cancelled int
	for range 4 {
		if err := <-finished; err == nil {
			completed++
		} else {
			cancelled++
		}
	}
	if completed != 2 || cancelled != 2 {
		t.Errorf("completed %d and cancelled %d handlers, want 2 and 2", completed, cancelled)
	}
	waitFor(t, 30*time.Second, "the 2 abandoned messages back in the queue", func() bool {
		return queueDepth(t, cfg.QueuePrefix+".slow") == 2
	})
}

// A negative or oversized Concurrency is refused when the bus is built.
func TestConcurrencyOutOfRangeIsRefused(t *testing.T) {
	db := dbtest.New(t)
	relay, _ := newOutbox(t, db)
	nop := func(context.Context, messaging.Event) error { return nil }
	for _, n := range []int{-1, messaging.MaxConcurrency + 1} {
		_, err := messaging.New(messaging.Config{AMQPURL: amqpURL()}, relay, testLogger(), prometheus.NewRegistry(),
			[]messaging.Subscription{{Consumer: "c", EventTypes: []string{"test.x"}, Handle: nop, Concurrency: n}})
		if err == nil || !strings.Contains(err.Error(), "concurrency") {
			t.Errorf("Concurrency %d: err = %v, want a concurrency error", n, err)
		}
	}
}

// Two copies of one event (at-least-once delivery) are never handled at the same moment by a
// consumer with Concurrency > 1 in one replica, while distinct events still run side by side.
func TestCopiesOfOneEventAreHandledOneAfterTheOther(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "copies")

	var all inFlight
	var mu sync.Mutex
	perID := map[string]*inFlight{}
	overlap := newBarrier(3)
	got := newCollector()
	handle := func(ctx context.Context, e messaging.Event) error {
		mu.Lock()
		f := perID[e.ID]
		if f == nil {
			f = &inFlight{}
			perID[e.ID] = f
		}
		mu.Unlock()
		f.enter()
		all.enter()
		defer f.leave()
		defer all.leave()
		overlap.wait(300 * time.Millisecond) // holds each copy long enough for an overlap to show
		return got.handle(ctx, e)
	}
	startBus(t, cfg, relay, messaging.Subscription{Consumer: "copies", EventTypes: []string{"test.copy"}, Concurrency: 4, Handle: handle})

	ctx := context.Background()
	var ids []string
	for i := range 3 {
		e, err := messaging.NewEvent(tenancy.With(ctx, tenancy.DefaultID), "test", "test.copy", map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
		for range 2 { // the same event twice, as a repeated forward would
			if err := db.WithTx(ctx, func(ctx context.Context) error { return pub.Publish(ctx, e) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, 30*time.Second, "both copies of every event", func() bool {
		_, deliveries := got.snapshot()
		return deliveries == 6
	})
	seen, _ := got.snapshot()
	for _, id := range ids {
		if seen[id] != 2 {
			t.Errorf("event %s handled %d times, want 2", id, seen[id])
		}
		mu.Lock()
		if n := perID[id].max(); n != 1 {
			t.Errorf("%d copies of event %s handled at once, want 1", n, id)
		}
		mu.Unlock()
	}
	if n := all.max(); n < 2 {
		t.Errorf("at most %d handlers at once, want distinct events side by side", n)
	}
}
