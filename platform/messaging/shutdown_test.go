package messaging_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

// On stop, an in-flight handler finishes and its message is acked; a handler that outlives the
// grace period is cancelled and its message returns to the queue.
func TestGracefulShutdown(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "slow")
	cfg.ShutdownTimeout = 3 * time.Second // ten times the quick handler's 300 ms, however loaded the machine

	started := make(chan string, 10)
	finished := make(chan error, 10)
	slow := func(ctx context.Context, e messaging.Event) error {
		var p struct{ Wait string }
		if err := e.Decode(&p); err != nil {
			return err
		}
		started <- e.ID
		wait, err := time.ParseDuration(p.Wait)
		if err != nil {
			return err
		}
		select {
		case <-time.After(wait):
			finished <- nil
			return nil
		case <-ctx.Done():
			finished <- ctx.Err()
			return ctx.Err()
		}
	}
	sub := messaging.Subscription{Consumer: "slow", EventTypes: []string{"test.slow"}, Handle: slow}
	queue := cfg.QueuePrefix + ".slow"

	// Finishes within the grace period: completed and acked.
	bus := startBus(t, cfg, relay, sub)
	e := publishOne(t, db, pub, "test.slow", map[string]string{"wait": "300ms"}, true)
	if got := <-started; got != e.ID {
		t.Fatalf("started %s, want %s", got, e.ID)
	}
	bus.stop(t)
	if err := <-finished; err != nil {
		t.Fatalf("in-flight handler was interrupted: %v", err)
	}
	if n := queueDepth(t, queue); n != 0 {
		t.Fatalf("queue holds %d messages after a completed handler, want 0", n)
	}
	if n := outboxRows(t, db); n != 0 {
		t.Errorf("the forwarded row is still in the outbox after a graceful stop (%d rows)", n)
	}

	// Outlives the grace period: cancelled, message back in the queue, Run returns promptly.
	bus = startBus(t, cfg, relay, sub)
	e = publishOne(t, db, pub, "test.slow", map[string]string{"wait": "1h"}, true)
	for got := range started {
		if got == e.ID {
			break
		}
		// At-least-once: a forward interrupted by the first stop may be delivered again.
		t.Logf("redelivered %s", got)
		if err := <-finished; err != nil {
			t.Logf("second run ended with %v", err)
		}
	}
	stopAt := time.Now()
	bus.stop(t)
	took := time.Since(stopAt)
	if err := <-finished; err == nil {
		t.Fatal("the hour-long handler completed")
	}
	waitFor(t, 30*time.Second, "the abandoned message back in its queue", func() bool { return queueDepth(t, queue) == 1 })
	t.Logf("stop with a stuck handler took %s (grace %s)", took.Round(time.Millisecond), cfg.ShutdownTimeout)
}

// queueDepth is the number of ready messages in a queue.
func queueDepth(t *testing.T, queue string) int {
	t.Helper()
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspect %s: %v", queue, err)
	}
	return q.Messages
}

// Stopping while a forwarder is in the middle of a batch loses nothing: the rows it had not
// forwarded yet stay in the outbox for the next run.
func TestStopMidBatchLosesNothing(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "batch")
	ctx := context.Background()

	var ids []string
	for range 10 {
		events := make([]messaging.Event, 0, 100)
		for range 100 {
			e, err := messaging.NewEvent(tenancy.With(ctx, tenancy.DefaultID), "test", "test.created", map[string]int{"n": len(ids)})
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, e)
			ids = append(ids, e.ID)
		}
		if err := db.WithTx(ctx, func(ctx context.Context) error { return pub.Publish(ctx, events...) }); err != nil {
			t.Fatal(err)
		}
	}
	got := newCollector()
	sub := messaging.Subscription{Consumer: "batch", EventTypes: []string{"test.created"}, Handle: got.handle}
	for range 5 {
		before, _ := got.snapshot()
		bus := startBus(t, cfg, relay, sub)
		waitFor(t, 30*time.Second, "progress", func() bool {
			now, _ := got.snapshot()
			return len(now) > len(before) || outboxRows(t, db) == 0
		})
		bus.stop(t) // most likely mid-batch
	}
	left := outboxRows(t, db)
	startBus(t, cfg, relay, sub)
	waitFor(t, 30*time.Second, "every event after the interrupted runs", func() bool { return got.has(ids) })
	t.Logf("%d rows were left in the outbox after 5 interrupted runs", left)
	seen, deliveries := got.snapshot()
	t.Logf("%d events over interrupted runs: %d deliveries (%d duplicates)", len(seen), deliveries, deliveries-len(seen))
}

// A stop at any moment of the start is as clean and quick as any other. watermill's router, closed
// before it had subscribed, or closed while its handler watched a cancelled context instead of
// closing our subscriber, used to wait its whole close timeout and fail with "router close timeout".
func TestABusStoppedWhileStartingReturnsPromptlyAndCleanly(t *testing.T) {
	db := dbtest.New(t)
	cfg := testConfig(t, "starting")
	// The routers' close timeouts exceed 30 s: the bug took that long; a clean stop takes milliseconds,
	// and the 15 s bound leaves a loaded machine room.
	cfg.ShutdownTimeout = 30 * time.Second
	sub := messaging.Subscription{Consumer: "starting", EventTypes: []string{"test.starting"},
		Handle: func(context.Context, messaging.Event) error { return nil }}
	relay, _ := newOutbox(t, db)
	for i := range 30 {
		bus, err := messaging.New(cfg, relay, testLogger(), prometheus.NewRegistry(), []messaging.Subscription{sub})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- bus.Run(ctx) }()
		// Stop at a different moment of the start each time, from at once to after it.
		time.Sleep(time.Duration(i) * 3 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("stop %d ms into the start: Run = %v, want nil", i*3, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("stop %d ms into the start: Run still running after 15s", i*3)
		}
	}
}

// A graceful stop logs no error: the routers' "all handlers stopped", which watermill logs as an
// error, is expected when the bus itself closed their subscribers; an operator sees errors only for
// what went wrong.
func TestABusStoppedOnRequestLogsNoError(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "quiet")
	got := newCollector()
	sub := messaging.Subscription{Consumer: "quiet", EventTypes: []string{"test.quiet"}, Handle: got.handle}
	var errs hosttest.LogBuffer
	logger := slog.New(slog.NewTextHandler(&errs, &slog.HandlerOptions{Level: slog.LevelError}))
	bus, err := messaging.New(cfg, relay, logger, prometheus.NewRegistry(), []messaging.Subscription{sub})
	if err != nil {
		t.Fatal(err)
	}
	running := hosttest.RunBus(t, bus)
	e := publishOne(t, db, pub, "test.quiet", map[string]string{}, true)
	waitFor(t, 20*time.Second, "the event handled", func() bool { return got.has([]string{e.ID}) })
	running.Stop(t)
	if logged := errs.String(); logged != "" {
		t.Fatalf("a graceful stop logged errors:\n%s", logged)
	}
}
