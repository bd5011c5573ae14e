package notes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelson/keelson/examples/notes"
	"github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/outbox"
)

const token = "notes-test-token"

// platform is the notes module wired the way app wires every module: registry, HTTP engine,
// outbox publisher, message bus (forwarder and consumers) and job runner, on a fresh database and
// an isolated exchange. spy receives every note.* event that reached RabbitMQ.
type platform struct {
	db      *database.DB
	metrics *prometheus.Registry
	server  *httptest.Server
	events  module.EventPublisher
	spy     chan messaging.Event
}

func startPlatform(t *testing.T) *platform {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}

	db := dbtest.New(t) // platform migrations only: the module's come from the module, as in `keelson migrate`
	m := notes.New()
	if err := database.Migrate(ctx, db.SQL(), []database.MigrationSet{{Owner: m.Name(), FS: m.Migrations()}}); err != nil {
		t.Fatalf("migrate notes: %v", err)
	}
	publisher, err := outbox.NewPublisher(db)
	if err != nil {
		t.Fatal(err)
	}
	jobClient, err := jobs.NewClient(db)
	if err != nil {
		t.Fatal(err)
	}
	metrics := prometheus.NewRegistry()
	reg := module.NewRegistry(module.Deps{DB: db, Events: publisher, Jobs: jobClient, Logger: logger, Metrics: metrics, InstanceID: "notes-test"})
	if err := m.Register(reg.For(m)); err != nil {
		t.Fatalf("register: %v", err)
	}

	p := &platform{db: db, metrics: metrics, events: publisher, spy: make(chan messaging.Event, 100)}
	spy := messaging.Subscription{Consumer: "notes_test.spy", EventTypes: []string{"note.*"},
		Handle: func(_ context.Context, e messaging.Event) error { p.spy <- e; return nil }}
	id := hex5()
	busCfg := messaging.Config{AMQPURL: amqpURL(), Exchange: "notes_test." + id, QueuePrefix: "notes_test." + id,
		RetryInitialInterval: 10 * time.Millisecond, RetryMaxInterval: 100 * time.Millisecond, ShutdownTimeout: 5 * time.Second}
	subs := append(reg.Subscriptions(), spy)
	bus, err := messaging.New(busCfg, db, logger, metrics, subs)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := jobs.NewRunner(db, jobs.Config{InstanceID: "notes-test", PollInterval: 20 * time.Millisecond},
		reg.JobKinds(), reg.Schedules(), logger, metrics)
	if err != nil {
		t.Fatal(err)
	}
	engine, api, err := httpapi.NewEngine(httpapi.Options{Logger: logger, Tokens: []string{token}, Metrics: metrics,
		ConflictCodes: reg.ConflictCodes(), OpenAPI: reg.OpenAPIFragments()})
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range reg.RouteSets() {
		rs.Mount(api)
	}
	doc, err := httpapi.OpenAPIDocument(reg.OpenAPIFragments()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := httpapi.CheckOpenAPI(engine, doc); err != nil {
		t.Fatalf("openapi.json does not match the routes: %v", err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, run := range []func(context.Context) error{bus.Run, runner.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- run(ctx) }()
	}
	select {
	case <-bus.Ready():
	case err := <-errs:
		t.Fatalf("bus or runner stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("bus not ready")
	}
	p.server = httptest.NewServer(engine)
	t.Cleanup(func() {
		p.server.Close()
		cancel()
		wg.Wait()
		deleteTopology(busCfg, subs)
	})
	return p
}

func (p *platform) do(t *testing.T, method, path, ifMatch string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, p.server.URL+"/api/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

// eventually polls get until ok, or fails after 20 s.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNotesModuleEndToEnd(t *testing.T) {
	p := startPlatform(t)

	status, h, note := p.do(t, http.MethodPost, "/notes", "", map[string]any{"title": " Groceries ", "body": "eggs milk bread"})
	if status != http.StatusCreated || note["title"] != "Groceries" || h.Get("Location") != "/api/v1/notes/"+note["id"].(string) {
		t.Fatalf("create: %d %v %v", status, h, note)
	}
	id, etag := note["id"].(string), h.Get("ETag")
	if etag != `"`+note["version"].(string)+`"` {
		t.Fatalf("ETag %s does not carry version %v", etag, note["version"])
	}

	// The job counts words in the background.
	eventually(t, "the word count job", func() bool {
		_, _, n := p.do(t, http.MethodGet, "/notes/"+id, "", nil)
		return n["word_count"] == float64(3)
	})
	// The event written in the create's transaction reached RabbitMQ.
	select {
	case e := <-p.spy:
		var changed notes.NoteChanged
		if err := e.Decode(&changed); err != nil || e.Type != notes.EventNoteCreated || changed.NoteID.String() != id {
			t.Fatalf("event %s %s: %+v %v", e.Type, e.Payload, changed, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("note.created never arrived")
	}

	// The job's Save changed the row, so the version the client holds is stale: 412, nothing written.
	status, _, _ = p.do(t, http.MethodPatch, "/notes/"+id, etag, map[string]any{"body": "stale"})
	if status != http.StatusPreconditionFailed {
		t.Fatalf("stale If-Match: %d, want 412", status)
	}
	_, h, current := p.do(t, http.MethodGet, "/notes/"+id, "", nil)
	if current["body"] != "eggs milk bread" {
		t.Fatalf("a 412 wrote: %v", current)
	}

	// Twenty concurrent edits from the same version: exactly one wins; the others get 412 (they read
	// the winner's row) or 409 (they passed the check and lost at the xmin comparison).
	fresh := h.Get("ETag")
	codes := make(chan int, 20)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, _ := p.do(t, http.MethodPatch, "/notes/"+id, fresh, map[string]any{"body": "edit " + string(rune('a'+i))})
			codes <- status
		}()
	}
	wg.Wait()
	close(codes)
	won := 0
	for c := range codes {
		switch c {
		case http.StatusOK:
			won++
		case http.StatusPreconditionFailed, http.StatusConflict:
		default:
			t.Fatalf("concurrent edit answered %d", c)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent edits won, want exactly 1", won)
	}
	eventually(t, "the recount after the edit", func() bool {
		_, _, n := p.do(t, http.MethodGet, "/notes/"+id, "", nil)
		return n["word_count"] == float64(2)
	})

	// Bad input: 4xx problem+json, nothing written.
	for _, c := range []struct {
		method, path string
		body         any
		want         int
	}{
		{http.MethodPost, "/notes", map[string]any{"body": "no title"}, http.StatusUnprocessableEntity},
		{http.MethodPost, "/notes", map[string]any{"title": "x", "colour": "red"}, http.StatusUnprocessableEntity},
		{http.MethodPost, "/notes", map[string]any{"title": "   "}, http.StatusUnprocessableEntity},
		{http.MethodGet, "/notes/not-a-uuid", nil, http.StatusNotFound},
		{http.MethodGet, "/notes/" + uuid.NewString(), nil, http.StatusNotFound},
	} {
		if status, _, body := p.do(t, c.method, c.path, "", c.body); status != c.want || body["code"] == nil {
			t.Errorf("%s %s %v: %d %v, want %d problem+json", c.method, c.path, c.body, status, body, c.want)
		}
	}
	var count int64
	if err := p.db.Gorm().Table("notes").Count(&count).Error; err != nil || count != 1 {
		t.Fatalf("%d notes after bad input (err %v), want 1", count, err)
	}
}

func TestNotesOpensOneNotePerConversationEvenWhenTheEventIsRepeated(t *testing.T) {
	p := startPlatform(t)
	ctx := context.Background()
	conversationID := uuid.New()
	e, err := messaging.NewEvent(ctx, "conversations", contract.EventConversationCreated,
		contract.ConversationCreated{ConversationID: conversationID, Title: "Trip to Lisbon", CreatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	// What the conversations module does, twice with the same event id (a redelivery).
	for range 2 {
		if err := p.db.WithTx(ctx, func(ctx context.Context) error { return p.events.Publish(ctx, e) }); err != nil {
			t.Fatal(err)
		}
	}
	var n notes.Note
	eventually(t, "the note of the conversation", func() bool {
		err := p.db.Gorm().Where("conversation_id = ?", conversationID).First(&n).Error
		return err == nil && n.WordCount != nil
	})
	if n.Title != "Notes on Trip to Lisbon" {
		t.Fatalf("note title %q", n.Title)
	}
	// The second copy was consumed too, and skipped by the inbox: handled twice, failed never.
	eventually(t, "both copies consumed", func() bool { return p.counter(t, "keelson_messages_handled_total", notes.ConsumerNotes) == 2 })
	if failed := p.counter(t, "keelson_messages_failed_total", notes.ConsumerNotes); failed != 0 {
		t.Fatalf("%v handler attempts failed, want 0", failed)
	}
	var count int64
	if err := p.db.Gorm().Model(&notes.Note{}).Where("conversation_id = ?", conversationID).Count(&count).Error; err != nil || count != 1 {
		t.Fatalf("%d notes for the conversation (err %v), want 1", count, err)
	}
}

// counter reads one consumer's sample of a counter family from the registry.
func (p *platform) counter(t *testing.T, family, consumer string) float64 {
	t.Helper()
	families, err := p.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "consumer" && l.GetValue() == consumer {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func amqpURL() string {
	if u := os.Getenv("TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

func hex5() string { return uuid.NewString()[:8] }

// deleteTopology removes the test's queues and exchange from the shared broker.
func deleteTopology(cfg messaging.Config, subs []messaging.Subscription) {
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
	for _, s := range subs {
		_, _ = ch.QueueDelete(cfg.QueuePrefix+"."+s.Consumer, false, false, false)
		_, _ = ch.QueueDelete(cfg.QueuePrefix+"."+s.Consumer+".dead", false, false, false)
	}
	_ = ch.ExchangeDelete(cfg.Exchange, false, false)
}
