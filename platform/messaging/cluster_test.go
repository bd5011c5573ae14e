package messaging_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
)

func TestQuorumQueuesCarryEventsAndKeepTheirType(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "quorum")
	cfg.QueueType = messaging.QueueTypeQuorum
	got := newCollector()
	startBus(t, cfg, relay, messaging.Subscription{Consumer: "quorum", EventTypes: []string{"test.created"}, Handle: got.handle})

	var ids []string
	for i := range 100 {
		ids = append(ids, publishOne(t, db, pub, "test.created", map[string]int{"i": i}, true).ID)
	}
	waitFor(t, 30*time.Second, "every event through the quorum queue", func() bool { return got.has(ids) })

	// The queues are quorum queues: RabbitMQ refuses to redeclare them as classic (406), which is
	// also why a queue cannot change type in place.
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, queue := range []string{cfg.QueuePrefix + ".quorum", cfg.QueuePrefix + ".quorum.dead"} {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.QueueDeclare(queue, true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeClassic})
		var amqpErr *amqp.Error
		if !errors.As(err, &amqpErr) || amqpErr.Code != amqp.PreconditionFailed || !strings.Contains(amqpErr.Reason, "x-queue-type") {
			t.Errorf("redeclaring %s as classic: %v, want 406 inequivalent x-queue-type", queue, err)
		}
		_ = ch.Close()
	}
}

func TestAnInvalidQueueTypeIsRefused(t *testing.T) {
	db := dbtest.New(t)
	cfg := testConfig(t)
	cfg.QueueType = "mirrored"
	relay, _ := newOutbox(t, db)
	_, err := messaging.New(cfg, relay, testLogger(), prometheus.NewRegistry(), nil)
	if err == nil || !strings.Contains(err.Error(), "mirrored") {
		t.Fatalf("queue type mirrored: %v, want an error naming it", err)
	}
}

// TestABusFailsOverToTheNextBrokerAddress gives the bus two addresses of one broker, each behind its
// own proxy, and cuts the first for good mid-flow: the bus reconnects through the second and
// nothing committed is lost.
func TestABusFailsOverToTheNextBrokerAddress(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	target, err := url.Parse(amqpURL())
	if err != nil {
		t.Fatal(err)
	}
	first, second := hosttest.NewProxy(t, target.Host), hosttest.NewProxy(t, target.Host)
	addr := func(p *hosttest.Proxy) string {
		return (&url.URL{Scheme: target.Scheme, User: target.User, Host: p.Addr(), Path: target.Path}).String()
	}
	cfg := testConfig(t, "failover")
	cfg.AMQPURL = addr(first) + "," + addr(second)
	got := newCollector()
	bus := startBus(t, cfg, relay, messaging.Subscription{Consumer: "failover", EventTypes: []string{"test.created"}, Handle: got.handle})

	var ids []string
	publish := func(n int) {
		for range n {
			ids = append(ids, publishOne(t, db, pub, "test.created", map[string]int{"n": len(ids)}, true).ID)
		}
	}
	publish(100)
	first.Cut()
	publish(200)
	waitFor(t, 60*time.Second, "every event after the first address went away", func() bool { return got.has(ids) })
	waitFor(t, 30*time.Second, "an empty outbox", func() bool { return outboxRows(t, db) == 0 })
	if err := bus.bus.Ping(context.Background()); err != nil {
		t.Errorf("Ping with the first address cut: %v", err)
	}
	seen, deliveries := got.snapshot()
	t.Logf("%d events, %d received, %d duplicates", len(ids), len(seen), deliveries-len(seen))
}

// TestABusStartsPastADeadFirstBrokerAddress lists a loopback port nobody listens on before the
// real broker: the bus dials past it at start and carries every event.
func TestABusStartsPastADeadFirstBrokerAddress(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	target, err := url.Parse(amqpURL())
	if err != nil {
		t.Fatal(err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := closed.Addr().String()
	_ = closed.Close() // the port now refuses connections
	cfg := testConfig(t, "deadfirst")
	cfg.AMQPURL = (&url.URL{Scheme: target.Scheme, User: target.User, Host: dead, Path: target.Path}).String() + "," + amqpURL()
	got := newCollector()
	bus := startBus(t, cfg, relay, messaging.Subscription{Consumer: "deadfirst", EventTypes: []string{"test.created"}, Handle: got.handle})

	var ids []string
	for i := range 50 {
		ids = append(ids, publishOne(t, db, pub, "test.created", map[string]int{"i": i}, true).ID)
	}
	waitFor(t, 30*time.Second, "every event with the first address dead", func() bool { return got.has(ids) })
	if err := bus.bus.Ping(context.Background()); err != nil {
		t.Errorf("Ping with the first address dead: %v", err)
	}
}
