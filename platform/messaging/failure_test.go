package messaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/messaging"
)

// A handler that always fails is tried MaxRetries+1 times, then its message lands in the consumer's
// dead-letter queue; a panicking handler is treated the same and the process keeps consuming.
func TestFailingAndPanickingHandlersDeadLetter(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "failing", "panicky")
	cfg.MaxRetries = 2

	var failingAttempts, panickyAttempts atomic.Int64
	failing := func(context.Context, messaging.Event) error {
		failingAttempts.Add(1)
		return errors.New("always fails")
	}
	ok := newCollector()
	panicky := func(ctx context.Context, e messaging.Event) error {
		var p struct{ Panic bool }
		if err := e.Decode(&p); err != nil {
			return err
		}
		if p.Panic {
			panickyAttempts.Add(1)
			panic("handler bug")
		}
		return ok.handle(ctx, e)
	}
	bus := startBus(t, cfg, relay,
		messaging.Subscription{Consumer: "failing", EventTypes: []string{"test.fail"}, Handle: failing},
		messaging.Subscription{Consumer: "panicky", EventTypes: []string{"test.work"}, Handle: panicky},
	)

	failed := publishOne(t, db, pub, "test.fail", map[string]bool{}, true)
	poison := publishOne(t, db, pub, "test.work", map[string]bool{"panic": true}, true)
	var good []string
	for range 5 {
		good = append(good, publishOne(t, db, pub, "test.work", map[string]bool{"panic": false}, true).ID)
	}

	waitFor(t, 30*time.Second, "the good messages after the panicking one", func() bool { return ok.has(good) })
	deadFailing := readQueue(t, cfg.QueuePrefix+".failing.dead", 1)
	deadPanicky := readQueue(t, cfg.QueuePrefix+".panicky.dead", 1)

	if got := failingAttempts.Load(); got != 3 {
		t.Errorf("failing handler attempts = %d, want 3 (1 + MaxRetries)", got)
	}
	if got := panickyAttempts.Load(); got != 3 {
		t.Errorf("panicking handler attempts = %d, want 3", got)
	}
	assertDead(t, deadFailing[0], failed, "failing", "always fails")
	assertDead(t, deadPanicky[0], poison, "panicky", "handler bug")

	waitFor(t, 30*time.Second, "metrics", func() bool {
		return bus.counter(t, "keelson_messages_dead_lettered_total", "failing") == 1 &&
			bus.counter(t, "keelson_messages_dead_lettered_total", "panicky") == 1 &&
			bus.counter(t, "keelson_messages_handled_total", "panicky") == 5
	})
	if got := bus.counter(t, "keelson_messages_failed_total", "failing"); got != 3 {
		t.Errorf("failed_total{failing} = %v, want 3", got)
	}
	if got := bus.counter(t, "keelson_outbox_forward_latency_seconds", ""); got != 7 {
		t.Errorf("forward latency samples = %v, want 7", got)
	}
}

func assertDead(t *testing.T, d amqp.Delivery, e messaging.Event, consumer, reason string) {
	t.Helper()
	if d.MessageId != e.ID {
		t.Errorf("dead message id = %q, want %q", d.MessageId, e.ID)
	}
	if got := d.Headers[messaging.HeaderEventType]; got != e.Type {
		t.Errorf("dead message type header = %v, want %s", got, e.Type)
	}
	if got := d.Headers[messaging.HeaderDeadConsumer]; got != consumer {
		t.Errorf("dead_consumer = %v, want %s", got, consumer)
	}
	if got, _ := d.Headers[messaging.HeaderDeadReason].(string); !contains(got, reason) {
		t.Errorf("dead_reason = %q, want it to mention %q", got, reason)
	}
	if !json.Valid(d.Body) || string(d.Body) != string(e.Payload) {
		t.Errorf("dead body = %s, want %s", d.Body, e.Payload)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// readQueue gets n messages from a queue (acking them), waiting for them to arrive.
func readQueue(t *testing.T, queue string, n int) []amqp.Delivery {
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
	var out []amqp.Delivery
	waitFor(t, 30*time.Second, "messages in "+queue, func() bool {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("get %s: %v", queue, err)
		}
		if ok {
			out = append(out, d)
		}
		return len(out) >= n
	})
	return out
}
