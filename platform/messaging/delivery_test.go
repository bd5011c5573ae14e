package messaging_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
)

// Consumers receive exactly the events of committed units of work, across event types.
func TestCommittedEventsArriveRolledBackNever(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "all", "updates")
	all, updates := newCollector(), newCollector()
	startBus(t, cfg, relay,
		messaging.Subscription{Consumer: "all", EventTypes: []string{"test.created", "test.updated"}, Handle: all.handle},
		messaging.Subscription{Consumer: "updates", EventTypes: []string{"test.updated"}, Handle: updates.handle},
	)

	const iterations, workers = 1000, 8
	var mu sync.Mutex
	committed, committedUpdates, rolledBack := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < iterations; i += workers {
				eventType := "test.created"
				if i%2 == 0 {
					eventType = "test.updated"
				}
				commit := i%3 != 0
				e := publishOne(t, db, pub, eventType, map[string]int{"i": i}, commit)
				mu.Lock()
				switch {
				case !commit:
					rolledBack[e.ID] = true
				case eventType == "test.updated":
					committedUpdates[e.ID] = true
					committed[e.ID] = true
				default:
					committed[e.ID] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d committed (%d updates), %d rolled back", len(committed), len(committedUpdates), len(rolledBack))

	waitFor(t, 60*time.Second, "every committed event at both consumers", func() bool {
		return all.has(keys(committed)) && updates.has(keys(committedUpdates))
	})
	waitFor(t, 30*time.Second, "an empty outbox", func() bool { return outboxRows(t, db) == 0 })

	gotAll, deliveriesAll := all.snapshot()
	gotUpdates, _ := updates.snapshot()
	assertSameSet(t, "consumer all", gotAll, committed)
	assertSameSet(t, "consumer updates", gotUpdates, committedUpdates)
	for id := range rolledBack {
		if gotAll[id] > 0 || gotUpdates[id] > 0 {
			t.Errorf("rolled back event %s was delivered", id)
		}
	}
	t.Logf("consumer all: %d deliveries for %d events", deliveriesAll, len(gotAll))
}

// A message forwarded while no consumer runs waits in the consumer's queue, declared at startup.
func TestMessageForwardedBeforeConsumerStartsIsConsumed(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "late")
	never := func(context.Context, messaging.Event) error {
		t.Error("forward-only bus must not consume")
		return nil
	}
	forwardOnly := cfg
	forwardOnly.ForwardOnly = true
	forwarder := startBus(t, forwardOnly, relay, messaging.Subscription{Consumer: "late", EventTypes: []string{"test.created"}, Handle: never})

	e := publishOne(t, db, pub, "test.created", map[string]string{"k": "v"}, true)
	waitFor(t, 30*time.Second, "the event forwarded", func() bool {
		return forwarder.counter(t, "keelson_outbox_forwarded_total", "") == 1
	})
	forwarder.stop(t)

	got := newCollector()
	startBus(t, cfg, relay, messaging.Subscription{Consumer: "late", EventTypes: []string{"test.created"}, Handle: got.handle})
	waitFor(t, 30*time.Second, "the early event consumed", func() bool { return got.has([]string{e.ID}) })
}

// Events committed while the broker is unreachable for 10 s all arrive once it is back.
func TestBrokerOutageLosesNothing(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	target, err := url.Parse(amqpURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := hosttest.NewProxy(t, target.Host)
	cfg := testConfig(t, "outage")
	cfg.AMQPURL = (&url.URL{Scheme: target.Scheme, User: target.User, Host: proxy.Addr(), Path: target.Path}).String()
	got := newCollector()
	bus := startBus(t, cfg, relay, messaging.Subscription{Consumer: "outage", EventTypes: []string{"test.created"}, Handle: got.handle})

	var ids []string
	publish := func(n int) {
		for range n {
			ids = append(ids, publishOne(t, db, pub, "test.created", map[string]int{"n": len(ids)}, true).ID)
			time.Sleep(20 * time.Millisecond)
		}
	}
	publish(50)
	waitFor(t, 30*time.Second, "delivery before the outage", func() bool { return got.has(ids) })

	proxy.Cut()
	cutAt := time.Now()
	for time.Since(cutAt) < 10*time.Second {
		publish(10)
	}
	if err := bus.bus.Ping(context.Background()); err == nil {
		t.Error("Ping succeeded while the broker was unreachable")
	}
	proxy.Restore()
	publish(50)

	waitFor(t, 60*time.Second, "every event after the outage", func() bool { return got.has(ids) })
	waitFor(t, 30*time.Second, "an empty outbox", func() bool { return outboxRows(t, db) == 0 })
	if err := bus.bus.Ping(context.Background()); err != nil {
		t.Errorf("Ping after restore: %v", err)
	}
	seen, deliveries := got.snapshot()
	t.Logf("%d events committed, %d received, %d deliveries (%d duplicates)", len(ids), len(seen), deliveries, deliveries-len(seen))
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func assertSameSet(t *testing.T, what string, got map[string]int, want map[string]bool) {
	t.Helper()
	for id := range want {
		if got[id] == 0 {
			t.Errorf("%s: committed event %s missing", what, id)
		}
	}
	for id := range got {
		if !want[id] {
			t.Errorf("%s: unexpected event %s", what, id)
		}
	}
}

// A commit that wrote outbox rows wakes an idle forwarder of its process: the event does not wait for
// the next poll, here a minute away.
func TestACommitWakesAnIdleForwarderOfItsProcess(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "woken")
	cfg.PollInterval = time.Minute
	got := newCollector()
	startBus(t, cfg, relay, messaging.Subscription{Consumer: "woken", EventTypes: []string{"test.created"}, Handle: got.handle})

	for i := range 3 { // each time the forwarders are idle again
		e := publishOne(t, db, pub, "test.created", map[string]int{"i": i}, true)
		waitFor(t, 20*time.Second, "the event consumed long before the next poll", func() bool { return got.has([]string{e.ID}) })
	}
}

// outboxPolls counts the forwarders' outbox polls of a pool.
type outboxPolls struct{ n atomic.Int64 }

func (p *outboxPolls) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "outbox_messages") && strings.Contains(d.SQL, "SKIP LOCKED") {
		p.n.Add(1)
	}
	return ctx
}

func (*outboxPolls) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func TestAForwarderThatReadLessThanABatchWaitsForTheNextCommitInsteadOfPollingAgainAtOnce(t *testing.T) {
	polls := &outboxPolls{}
	db := dbtest.Create(t).OpenTraced(t, polls)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "batched")
	cfg.PollInterval, cfg.Forwarders = time.Minute, 1
	got := newCollector()
	startBus(t, cfg, relay, messaging.Subscription{Consumer: "batched", EventTypes: []string{"test.created"}, Handle: got.handle})
	waitFor(t, 20*time.Second, "the forwarder's first poll", func() bool { return polls.n.Load() == 1 })

	for i := range 3 {
		e := publishOne(t, db, pub, "test.created", map[string]int{"i": i}, true)
		waitFor(t, 20*time.Second, "the event consumed", func() bool { return got.has([]string{e.ID}) })
		require.Never(t, func() bool { return polls.n.Load() > int64(i+2) }, 300*time.Millisecond, 5*time.Millisecond,
			"one poll per commit: the one that read its row, none after it")
	}
}
