// Package hosttest starts replicas of real modules on the real PostgreSQL and RabbitMQ for tests:
// a fresh exchange and queue prefix per test, an HTTP server per replica, everything stopped at the end.
package hosttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/host"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/secrets"
	"github.com/keelson/keelson/platform/telemetry"
)

// Token is the bearer token every test replica accepts.
const Token = "test-token"

// AMQPURL is the broker tests use (TEST_AMQP_URL overrides it).
func AMQPURL() string {
	if u := os.Getenv("TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// Broker returns bus settings with an exchange and queue prefix no other test uses, and short
// intervals so tests run quickly. Replicas of one test share it.
func Broker() messaging.Config {
	id := randomHex(5)
	return messaging.Config{
		AMQPURL:              AMQPURL(),
		Exchange:             "test." + id,
		QueuePrefix:          "test." + id,
		PollInterval:         20 * time.Millisecond,
		RetryInitialInterval: 20 * time.Millisecond,
		RetryMaxInterval:     200 * time.Millisecond,
		ShutdownTimeout:      5 * time.Second,
	}
}

// Jobs returns runner settings with short polls and retries for tests.
func Jobs() jobs.Config {
	return jobs.Config{
		PollInterval:    50 * time.Millisecond,
		RetryBase:       100 * time.Millisecond,
		RetryMax:        500 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
		DepthInterval:   -1,
	}
}

// Logger writes errors only, or everything with TEST_LOG set.
func Logger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return telemetry.NewLogger(os.Stderr, "text", level)
}

// Options choose what one replica runs. Zero Messaging and Jobs take Broker() and Jobs().
type Options struct {
	Messaging  messaging.Config
	Jobs       jobs.Config
	Background bool // run the bus and the job runner; without it events stay in the outbox
	InstanceID string
	Pages      []host.Pages // browser pages beside the API (the web console)
	Secrets    *secrets.Box // seals what modules store at rest; nil = as they are
	RateLimit  int          // requests per token and RateWindow across replicas; 0 = no limit
	RateWindow time.Duration
	// MetricsListener serves /metrics apart from the API; nil = on the API listener.
	MetricsListener net.Listener
	MetricsPprof    bool // /debug/pprof/ on MetricsListener
}

// Replica is a started replica.
type Replica struct {
	*host.Replica
	URL        string
	InstanceID string
	stop       func()
}

// Stop stops the replica at once (also done at test end).
func (r *Replica) Stop() { r.stop() }

// Start builds a replica of mods on db and serves it on a loopback port until the test ends.
func Start(t testing.TB, db *database.DB, opts Options, mods ...module.Module) *Replica {
	t.Helper()
	if opts.Messaging.AMQPURL == "" {
		opts.Messaging = Broker()
	}
	if opts.Jobs == (jobs.Config{}) {
		opts.Jobs = Jobs()
	}
	if opts.InstanceID == "" {
		opts.InstanceID = "test-" + randomHex(3)
	}
	replica, err := host.New(host.Options{
		DB: db, Logger: Logger(), InstanceID: opts.InstanceID, Tokens: []string{Token},
		Messaging: opts.Messaging, Jobs: opts.Jobs, ShutdownTimeout: 5 * time.Second, Background: opts.Background,
		Pages: opts.Pages, Secrets: opts.Secrets, RateLimit: opts.RateLimit, RateWindow: opts.RateWindow,
		MetricsListener: opts.MetricsListener, MetricsPprof: opts.MetricsPprof,
	}, mods)
	if err != nil {
		t.Fatalf("hosttest: %v", err)
	}
	if opts.Background {
		// Registered before stop, so it runs after it: cleanups run last-in first-out.
		consumers := make([]string, 0)
		for _, s := range replica.Registry.Subscriptions() {
			consumers = append(consumers, s.Consumer)
		}
		t.Cleanup(func() { DeleteTopology(opts.Messaging, consumers) })
	}
	listener, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hosttest: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := replica.Run(ctx, listener); err != nil {
			t.Errorf("hosttest: replica stopped: %v", err)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("hosttest: replica did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	if opts.Background {
		select {
		case <-replica.Ready():
		case <-time.After(30 * time.Second):
			t.Fatal("hosttest: messaging bus not ready after 30s")
		}
	}
	return &Replica{Replica: replica, URL: "http://" + listener.Addr().String(), InstanceID: opts.InstanceID, stop: stop}
}

// DeleteTopology removes a test's queues (and their dead-letter queues) and exchange from the broker.
// Only what is unused goes: a queue another replica of the test still consumes, or the exchange while
// a queue is bound to it, stays until that replica's own cleanup.
func DeleteTopology(cfg messaging.Config, consumers []string) {
	conn, err := amqp.Dial(cfg.AMQPURL)
	if err != nil {
		return
	}
	defer conn.Close()
	// A refused if-unused delete closes its channel, so each delete gets its own.
	del := func(fn func(ch *amqp.Channel) error) {
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		defer ch.Close()
		_ = fn(ch)
	}
	for _, c := range consumers {
		q := cfg.QueuePrefix + "." + c
		for _, name := range []string{q, q + ".dead"} {
			del(func(ch *amqp.Channel) error { _, err := ch.QueueDelete(name, true, false, false); return err })
		}
	}
	del(func(ch *amqp.Channel) error { return ch.ExchangeDelete(cfg.Exchange, true, false) })
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
