package proposals_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/proposals"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/outbox"
)

const apiToken = "test-token"

// owners are the migration owners a harness database gets.
var owners = []string{"proposals"}

// harnessOptions choose what a replica runs. The zero value serves HTTP only (no bus, no job runner),
// so every event stays in the outbox where a test can count it.
type harnessOptions struct {
	background bool // run the messaging bus (forwarders + consumers)
}

// replica is one process's worth of the proposals module: its own pool, HTTP server and, with
// background, its own bus, on the shared database and broker.
type replica struct {
	db     *database.DB
	url    string
	events *recorder
}

// harness is a fresh database (and exchange) shared by the replicas started on it.
type harness struct {
	t      *testing.T
	db     *dbtest.Database
	bus    messaging.Config
	events *recorder
	n      int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	id := randomHex(5)
	h := &harness{
		t:  t,
		db: dbtest.Create(t, owners...),
		bus: messaging.Config{
			AMQPURL:              amqpURL(),
			Exchange:             "test.prop." + id,
			QueuePrefix:          "test.prop." + id,
			PollInterval:         20 * time.Millisecond,
			RetryInitialInterval: 20 * time.Millisecond,
			RetryMaxInterval:     200 * time.Millisecond,
			ShutdownTimeout:      5 * time.Second,
		},
		events: newRecorder(),
	}
	return h
}

// start runs one replica until the end of the test.
func (h *harness) start(opts harnessOptions) *replica {
	t := h.t
	t.Helper()
	h.n++
	db := h.db.Open(t)
	logger := testLogger()
	reg := prometheus.NewRegistry()
	pub, err := outbox.NewPublisher(db)
	require.NoError(t, err)
	registry := module.NewRegistry(module.Deps{DB: db, Events: pub, Logger: logger, Metrics: reg, InstanceID: "test-replica-" + randomHex(3)})

	m := proposals.New()
	require.NoError(t, m.Register(registry.For(m)))

	engine, api, err := httpapi.NewEngine(httpapi.Options{
		Logger: logger, Tokens: []string{apiToken}, Metrics: reg,
		ConflictCodes: registry.ConflictCodes(), OpenAPI: registry.OpenAPIFragments(),
	})
	require.NoError(t, err)
	for _, rs := range registry.RouteSets() {
		rs.Mount(api)
	}
	srv := httptest.NewServer(engine)
	t.Cleanup(srv.Close)

	r := &replica{db: db, url: srv.URL, events: h.events}
	if !opts.background {
		return r
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	subs := append(registry.Subscriptions(), h.events.subscription())
	consumers := make([]string, 0, len(subs))
	for _, s := range subs {
		consumers = append(consumers, s.Consumer)
	}
	t.Cleanup(func() { deleteTopology(h.bus, consumers) })
	bus, err := messaging.New(h.bus, db, logger, reg, subs)
	require.NoError(t, err)
	wg.Go(func() { _ = bus.Run(ctx) })
	select {
	case <-bus.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("messaging bus not ready after 30s")
	}

	return r
}

// recorder is a consumer of every event type: the test's view of what left the outbox.
type recorder struct {
	mu     sync.Mutex
	events []messaging.Event
	seen   map[string]bool
}

func newRecorder() *recorder { return &recorder{seen: map[string]bool{}} }

func (r *recorder) subscription() messaging.Subscription {
	return messaging.Subscription{Consumer: "test.recorder", EventTypes: []string{"#"}, Handle: func(_ context.Context, e messaging.Event) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.seen[e.ID] {
			r.seen[e.ID] = true
			r.events = append(r.events, e)
		}
		return nil
	}}
}

// ofType returns the recorded events of one type, in arrival order.
func (r *recorder) ofType(eventType string) []messaging.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []messaging.Event
	for _, e := range r.events {
		if e.Type == eventType {
			out = append(out, e)
		}
	}
	return out
}

// response is an HTTP answer read in full.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// decode unmarshals the body into a fresh T.
func decode[T any](t *testing.T, r *response) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.Body, &v), "body: %s", r.Body)
	return v
}

// problem is the part of a problem+json body the tests check.
type problem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Errors []struct {
		Field string `json:"field"`
	} `json:"errors"`
}

// do sends a request to the replica. body: nil (none), a string (sent as is) or a value (JSON).
// headers are name, value pairs; Content-Type defaults to application/json when there is a body.
func (r *replica) do(t *testing.T, method, path string, body any, headers ...string) *response {
	t.Helper()
	var reader io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		reader = strings.NewReader(b)
	case []byte:
		reader = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, r.url+path, reader)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %s: "+format, append([]any{timeout}, args...)...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count runs a COUNT(*) query.
func count(t *testing.T, db *database.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Gorm().Raw(query, args...).Scan(&n).Error)
	return n
}

func amqpURL() string {
	if u := os.Getenv("TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

func deleteTopology(cfg messaging.Config, consumers []string) {
	conn, err := amqp.Dial(cfg.AMQPURL)
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

func testLogger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
