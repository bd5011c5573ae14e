package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keelson/keelson/migrations"
	pcontract "github.com/keelson/keelson/modules/proposals/contract"
	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/outbox"
	"github.com/keelson/keelson/platform/secrets"
)

// harness is one replica of the module built from the real platform: PostgreSQL, the outbox, and,
// when asked, the RabbitMQ bus (forwarder and consumers) and the jobs runner (the sweep schedule).
type harness struct {
	t        testing.TB
	database *dbtest.Database
	db       *database.DB
	svc      *Service
	api      *httptest.Server
	registry *prometheus.Registry
	contract *hosttest.Contract // every answer is checked against the served OpenAPI document

	mu        sync.Mutex
	failed    []contract.DeliveryFailedPayload    // webhooks.delivery_failed events seen by an observer
	requested []contract.DeliveryRequestedPayload // deliveries requested by the webhooks.deliveries_requested events an observer saw
	results   []pcontract.ActionResult            // assistant.action_result events seen by an observer
	disabled  []contract.SubscriptionDisabledPayload
}

type harnessOptions struct {
	bus      bool
	jobs     bool
	database *dbtest.Database // another replica's database; nil = a fresh one
	logger   *slog.Logger     // nil = testLogger()
	secrets  *secrets.Box     // KEELSON_ENCRYPTION_KEYS of the replica; nil = stored as they are
	tracer   pgx.QueryTracer  // sees every statement of the replica's pool; nil = none
}

func testConfig() Config {
	return Config{
		AllowPrivateTargets: true,
		SendTimeout:         2 * time.Second,
		ClaimLease:          time.Minute,
		SweepInterval:       50 * time.Millisecond,
		RetrySchedule:       []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		HoldFor:             100 * time.Millisecond, // a timeout holds its endpoint no longer than the schedule's delays
	}
}

func testLogger() *slog.Logger {
	level := slog.Level(100)
	if os.Getenv("TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func newHarness(t testing.TB, cfg Config, opts harnessOptions) *harness {
	t.Helper()
	dbase := opts.database
	if dbase == nil {
		dbase = dbtest.Create(t, migrations.Sets(Name)...)
	}
	db := dbase.OpenTraced(t, opts.tracer)
	logger := opts.logger
	if logger == nil {
		logger = testLogger()
	}
	promReg := prometheus.NewRegistry()
	pub, err := outbox.NewPublisher(db, nil)
	require.NoError(t, err)

	jobClient, err := jobs.NewClient(db)
	require.NoError(t, err)
	reg := module.NewRegistry(module.Deps{DB: db, Events: pub, Jobs: jobClient, Logger: logger, Metrics: promReg, InstanceID: "test-" + uuid.NewString(), Secrets: opts.secrets})
	mod, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, mod.Register(reg.For(mod)))
	reg.For(invoices{}).PublicEvents(invoiceEvents...)
	require.NoError(t, reg.Err())

	engine, api, err := httpapi.NewEngine(httpapi.Options{Logger: logger, Tokens: []string{hosttest.Token}, Metrics: promReg,
		ConflictCodes: reg.ConflictCodes(), Events: reg.Catalog().Docs})
	require.NoError(t, err)
	for _, rs := range reg.RouteSets() {
		rs.Mount(api)
	}
	srv := httptest.NewServer(engine)
	t.Cleanup(srv.Close)

	h := &harness{t: t, database: dbase, db: db, svc: mod.Service(), api: srv, registry: promReg,
		contract: hosttest.LoadContract(t, srv.URL)}
	if opts.bus {
		subs := append(reg.Subscriptions(), messaging.Subscription{
			Consumer: "test.observer", EventTypes: []string{contract.DeliveryFailed, contract.DeliveriesRequested, pcontract.EventActionResult,
				contract.SubscriptionDisabled},
			Handle: h.observe,
		})
		h.startBus(subs, logger, promReg)
	}
	if opts.jobs {
		runner, err := jobs.NewRunner(db, jobs.Config{InstanceID: "test-" + uuid.NewString(), Workers: 2,
			PollInterval: 20 * time.Millisecond, Lease: 5 * time.Second, ShutdownTimeout: 5 * time.Second},
			reg.JobKinds(), reg.Schedules(), logger, promReg)
		require.NoError(t, err)
		hosttest.Go(t, "jobs runner", runner.Run)
	}
	return h
}

// invoices stands for another module of the binary: it declares public events and nothing else.
type invoices struct{}

func (invoices) Name() string                    { return "invoices" }
func (invoices) Migrations() fs.FS               { return nil }
func (invoices) Register(*module.Registry) error { return nil }

type invoiceSent struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int    `json:"amount"`
}

var invoiceEvents = []module.EventType{
	{Type: "invoice.sent", Description: "An invoice was sent.", Example: invoiceSent{InvoiceID: "inv_1", Amount: 1200}},
	{Type: "invoice.paid", Description: "An invoice was paid.", Example: invoiceSent{InvoiceID: "inv_1", Amount: 1200}},
}

// recordSpans makes the service trace its attempts, batches and ingestion into a recorder the test
// reads; the provider is returned for spans of the test's own.
func (h *harness) recordSpans() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	h.t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h.svc.traceAttempts(tp)
	return recorder, tp
}

// startBus runs the real messaging bus on an exchange and queues of the test's own, deleted at the end.
func (h *harness) startBus(subs []messaging.Subscription, logger *slog.Logger, reg prometheus.Registerer) {
	t := h.t
	cfg := hosttest.Broker()
	cfg.PollInterval, cfg.RetryInitialInterval, cfg.RetryMaxInterval = 10*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond
	cfg.ShutdownTimeout = 10 * time.Second
	consumers := make([]string, 0, len(subs))
	for _, s := range subs {
		consumers = append(consumers, s.Consumer)
	}
	// Registered before the bus's stop, so it runs after it: cleanups run last-in first-out.
	t.Cleanup(func() { hosttest.DeleteTopology(cfg, consumers) })
	relay, err := outbox.NewRelay(h.db) // finds the harness's events by polling every 10ms
	require.NoError(t, err)
	bus, err := messaging.New(cfg, relay, logger, reg, subs)
	require.NoError(t, err)
	hosttest.RunBus(t, bus)
}

// response is an API answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), string(r.body))
	return m
}

// call sends an authenticated API request; body is marshalled unless it is a string or []byte.
func (h *harness) call(method, path string, body any, headers ...string) response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(h.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.api.URL+"/api/v1/webhooks"+path, rd)
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+hosttest.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	h.contract.Check(h.t, req, resp.StatusCode, resp.Header, raw)
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// subscribe creates a subscription and returns its id and secret.
func (h *harness) subscribe(url string, patterns ...string) (id, secret string) {
	h.t.Helper()
	r := h.call(http.MethodPost, "/subscriptions", map[string]any{"url": url, "event_types": patterns})
	require.Equal(h.t, http.StatusCreated, r.status, string(r.body))
	m := r.json(h.t)
	return m["id"].(string), m["secret"].(string)
}

// publish posts an event and returns its id.
func (h *harness) publish(eventType string, data map[string]any) string {
	h.t.Helper()
	r := h.call(http.MethodPost, "/events", map[string]any{"type": eventType, "data": data})
	require.Equal(h.t, http.StatusAccepted, r.status, string(r.body))
	return r.json(h.t)["id"].(string)
}

// outboxMessage is a row of the outbox, decoded from watermill's forwarder envelope.
type outboxMessage struct {
	Topic   string
	Payload []byte
}

func (h *harness) outbox() []outboxMessage {
	h.t.Helper()
	var raws []string
	require.NoError(h.t, h.db.Gorm().Raw(`SELECT payload::text FROM outbox_messages ORDER BY "offset"`).Scan(&raws).Error)
	out := make([]outboxMessage, 0, len(raws))
	for _, raw := range raws {
		var env struct {
			DestinationTopic string `json:"destination_topic"`
			Payload          []byte `json:"payload"`
		}
		require.NoError(h.t, json.Unmarshal([]byte(raw), &env))
		out = append(out, outboxMessage{Topic: env.DestinationTopic, Payload: env.Payload})
	}
	return out
}

// requestMessages are the request messages in the outbox, in order.
func (h *harness) requestMessages() []contract.DeliveriesRequestedPayload {
	var out []contract.DeliveriesRequestedPayload
	for _, m := range h.outbox() {
		if m.Topic == contract.DeliveriesRequested {
			var p contract.DeliveriesRequestedPayload
			require.NoError(h.t, json.Unmarshal(m.Payload, &p))
			out = append(out, p)
		}
	}
	return out
}

// deliveryRequests are the deliveries requested by the messages in the outbox, in order.
func (h *harness) deliveryRequests() []contract.DeliveryRequestedPayload {
	var out []contract.DeliveryRequestedPayload
	for _, m := range h.requestMessages() {
		out = append(out, m.Deliveries...)
	}
	return out
}

// observe records the module's events as another consumer sees them.
func (h *harness) observe(_ context.Context, e messaging.Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch e.Type {
	case contract.DeliveryFailed:
		var p contract.DeliveryFailedPayload
		if err := e.Decode(&p); err != nil {
			return err
		}
		h.failed = append(h.failed, p)
	case contract.SubscriptionDisabled:
		var p contract.SubscriptionDisabledPayload
		if err := e.Decode(&p); err != nil {
			return err
		}
		h.disabled = append(h.disabled, p)
	case pcontract.EventActionResult:
		var p pcontract.ActionResult
		if err := e.Decode(&p); err != nil {
			return err
		}
		h.results = append(h.results, p)
	case contract.DeliveriesRequested:
		var p contract.DeliveriesRequestedPayload
		if err := e.Decode(&p); err != nil {
			return err
		}
		h.requested = append(h.requested, p.Deliveries...)
	}
	return nil
}

// observedRequests are the requests of one delivery an observer saw so far.
func (h *harness) observedRequests(id uuid.UUID) []contract.DeliveryRequestedPayload {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []contract.DeliveryRequestedPayload
	for _, p := range h.requested {
		if p.DeliveryID == id {
			out = append(out, p)
		}
	}
	return out
}

func (h *harness) actionResults() []pcontract.ActionResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]pcontract.ActionResult(nil), h.results...)
}

func (h *harness) disabledEvents() []contract.SubscriptionDisabledPayload {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]contract.SubscriptionDisabledPayload(nil), h.disabled...)
}

func (h *harness) failedEvents() []contract.DeliveryFailedPayload {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]contract.DeliveryFailedPayload(nil), h.failed...)
}

// receiver is a webhook endpoint recording every request; respond decides each answer.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []received
	respond  func(n int, w http.ResponseWriter, r *http.Request) // n = 1-based request number
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t testing.TB, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{respond: respond}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.requests = append(rc.requests, received{header: r.Header.Clone(), body: body})
		n := len(rc.requests)
		rc.mu.Unlock()
		if rc.respond != nil {
			rc.respond(n, w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.requests...)
}

func (rc *receiver) count() int { return len(rc.received()) }

// finished counts the attempts whose outcome is recorded (an attempt row exists from the take on).
func finished(as []Attempt) int {
	n := 0
	for _, a := range as {
		if a.Result != ResultInFlight {
			n++
		}
	}
	return n
}
