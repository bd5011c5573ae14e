package messaging_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/outbox"
	"github.com/keelson/keelson/platform/tenancy"
)

func amqpURL() string {
	if u := os.Getenv("TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testConfig isolates a test on RabbitMQ: its own exchange and queue prefix, deleted at the end.
func testConfig(t *testing.T, consumers ...string) messaging.Config {
	t.Helper()
	id := randomHex(5)
	cfg := messaging.Config{
		AMQPURL:              amqpURL(),
		Exchange:             "test.events." + id,
		QueuePrefix:          "test." + id,
		PollInterval:         20 * time.Millisecond,
		RetryInitialInterval: 10 * time.Millisecond,
		RetryMaxInterval:     50 * time.Millisecond,
		ShutdownTimeout:      10 * time.Second,
	}
	t.Cleanup(func() { deleteTopology(cfg, consumers) })
	return cfg
}

func deleteTopology(cfg messaging.Config, consumers []string) {
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	defer ch.Close()
	for _, c := range consumers {
		q := cfg.QueuePrefix + "." + c
		_, _ = ch.QueueDelete(q, false, false, false)
		_, _ = ch.QueueDelete(q+".dead", false, false, false)
	}
	_ = ch.ExchangeDelete(cfg.Exchange, false, false)
}

// testLogger is silent unless TEST_LOG is set: outage tests log an error per failed forward.
func testLogger() *slog.Logger {
	level := slog.Level(100)
	if os.Getenv("TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// runningBus is a Bus running in the background until stop (or the end of the test).
type runningBus struct {
	bus      *messaging.Bus
	registry *prometheus.Registry
	running  *hosttest.Running
}

func startBus(t *testing.T, cfg messaging.Config, relay *outbox.Relay, subs ...messaging.Subscription) *runningBus {
	t.Helper()
	reg := prometheus.NewRegistry()
	bus, err := messaging.New(cfg, relay, testLogger(), reg, subs)
	if err != nil {
		t.Fatalf("messaging.New: %v", err)
	}
	return &runningBus{bus: bus, registry: reg, running: hosttest.RunBus(t, bus)}
}

// stop cancels Run and waits for its graceful return.
func (rb *runningBus) stop(t *testing.T) {
	t.Helper()
	rb.running.Stop(t)
}

// counter reads a metric family of the bus, only the given consumer's sample unless consumer is "".
func (rb *runningBus) counter(t *testing.T, name, consumer string) float64 {
	t.Helper()
	if consumer == "" {
		return hosttest.Metric(t, rb.registry, name)
	}
	return hosttest.Metric(t, rb.registry, name, "consumer", consumer)
}

// collector records every delivery a handler sees, duplicates included.
type collector struct {
	mu   sync.Mutex
	seen map[string]int
	all  int
}

func newCollector() *collector { return &collector{seen: map[string]int{}} }

func (c *collector) handle(_ context.Context, e messaging.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[e.ID]++
	c.all++
	return nil
}

func (c *collector) snapshot() (ids map[string]int, deliveries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids = make(map[string]int, len(c.seen))
	for k, v := range c.seen {
		ids[k] = v
	}
	return ids, c.all
}

func (c *collector) has(ids []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if c.seen[id] == 0 {
			return false
		}
	}
	return true
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var errRollback = errors.New("rollback on purpose")

// publishOne commits (or rolls back) one unit of work that publishes one event, and returns it.
func publishOne(t *testing.T, db *database.DB, pub *outbox.Publisher, eventType string, payload any, commit bool) messaging.Event {
	t.Helper()
	ctx := context.Background()
	e, err := messaging.NewEvent(tenancy.With(ctx, tenancy.DefaultID), "test", eventType, payload)
	if err != nil {
		t.Errorf("NewEvent: %v", err)
		return e
	}
	err = db.WithTx(ctx, func(ctx context.Context) error {
		if err := pub.Publish(ctx, e); err != nil {
			return err
		}
		if !commit {
			return errRollback
		}
		return nil
	})
	if commit && err != nil {
		t.Errorf("commit: %v", err)
	}
	if !commit && !errors.Is(err, errRollback) {
		t.Errorf("rollback: %v", err)
	}
	return e
}

func outboxRows(t *testing.T, db *database.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Gorm().Raw(`SELECT count(*) FROM outbox_messages`).Scan(&n).Error; err != nil {
		t.Fatalf("count outbox: %v", err)
	}
	return n
}

// newOutbox returns db's outbox as one replica wires it: the relay its bus runs, and a publisher
// that wakes that relay after each commit.
func newOutbox(t *testing.T, db *database.DB) (*outbox.Relay, *outbox.Publisher) {
	t.Helper()
	relay, err := outbox.NewRelay(db)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := outbox.NewPublisher(db, relay)
	if err != nil {
		t.Fatal(err)
	}
	return relay, pub
}
