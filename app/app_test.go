package main

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/telemetry"
	"github.com/keelson/keelson/platform/tenancy"
)

const testToken = "app-test-token"

// pings is the smallest module that uses every extension point: a migration, a route, an event
// handler and a job kind. It stands for what users add.
type pings struct {
	mu       sync.Mutex
	handled  map[string]bool // ping ids seen by the event handler
	jobsDone map[string]bool // ping ids seen by the job
}

func (p *pings) Name() string { return "pings" }

func (p *pings) Migrations() fs.FS {
	return fstest.MapFS{"00001_pings.sql": {Data: []byte(
		"-- +goose Up\nCREATE TABLE pings (id uuid PRIMARY KEY, note text NOT NULL);\n-- +goose Down\nDROP TABLE pings;\n")}}
}

func (p *pings) Register(r *module.Registry) error {
	r.Routes(func(api *httpapi.API) {
		type createIn struct {
			Body struct {
				Note string `json:"note"`
			}
		}
		type createOut struct {
			Body struct {
				ID uuid.UUID `json:"id"`
			}
		}
		g := api.Module("", "pings")
		httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/pings", ID: "createPing", Summary: "Create a ping",
			Status: http.StatusCreated}, func(ctx context.Context, in *createIn) (*createOut, error) {
			out := &createOut{}
			out.Body.ID = uuid.New()
			id := out.Body.ID
			return out, r.DB.WithTx(ctx, func(ctx context.Context) error {
				if err := r.DB.Conn(ctx).Exec("INSERT INTO pings (id, note) VALUES (?, ?)", id, in.Body.Note).Error; err != nil {
					return err
				}
				ev, err := messaging.NewEvent(tenancy.With(ctx, tenancy.DefaultID), "pings", "ping.created", map[string]string{"id": id.String()})
				if err != nil {
					return err
				}
				if err := r.Events.Publish(ctx, ev); err != nil {
					return err
				}
				_, err = r.Jobs.Enqueue(ctx, "pings.echo", map[string]string{"id": id.String()}, jobs.EnqueueOptions{})
				return err
			})
		})
	})
	r.Subscribe(messaging.Subscription{Consumer: "pings.audit", EventTypes: []string{"ping.created"},
		Handle: func(_ context.Context, e messaging.Event) error {
			var body struct{ ID string }
			if err := e.Decode(&body); err != nil {
				return err
			}
			p.mark(p.handled, body.ID)
			return nil
		}})
	r.JobKind(jobs.Kind{Name: "pings.echo", Handle: func(_ context.Context, j jobs.Job) error {
		var body struct{ ID string }
		if err := j.Decode(&body); err != nil {
			return err
		}
		p.mark(p.jobsDone, body.ID)
		return nil
	}})
	return nil
}

func (p *pings) mark(set map[string]bool, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	set[id] = true
}

func (p *pings) has(set map[string]bool, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return set[id]
}

func testConfig(t *testing.T, databaseURL string) Config {
	t.Helper()
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	cfg, err := LoadConfig(env(map[string]string{
		"DATABASE_URL":                   databaseURL,
		"API_TOKENS":                     testToken,
		"AMQP_EXCHANGE":                  "test.app." + suffix,
		"AMQP_QUEUE_PREFIX":              "test.app." + suffix,
		"SHUTDOWN_TIMEOUT":               "10s",
		"WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",
	}))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startApp migrates the given modules into a fresh database and serves them until the test ends.
func startApp(t *testing.T, mods []module.Module) string {
	t.Helper()
	return startTracedApp(t, mods, telemetry.Disabled())
}

// startTracedApp is startApp recording spans with tracing.
func startTracedApp(t *testing.T, mods []module.Module, tracing telemetry.Tracing) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tdb := dbtest.Create(t)
	db := tdb.Open(t)
	if err := database.Migrate(ctx, db.SQL(), migrationSets(mods)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	cfg := testConfig(t, tdb.URL)
	replica, err := newReplica(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), db, mods, tracing, nil)
	if err != nil {
		t.Fatalf("wire: %v", err)
	}
	// Registered before the stop below, so it runs after it: the test's queues and exchange go away.
	var consumers []string
	for _, s := range replica.Registry.Subscriptions() {
		consumers = append(consumers, s.Consumer)
	}
	t.Cleanup(func() {
		hosttest.DeleteTopology(messaging.Config{AMQPURL: cfg.AMQPURL, Exchange: cfg.AMQPExchange, QueuePrefix: cfg.AMQPQueuePrefix}, consumers)
	})
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- replica.Run(ctx, listener) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not stop within 30s")
		}
	})
	base := "http://" + listener.Addr().String()
	waitFor(t, 30*time.Second, func() bool { return get(t, base+"/readyz", "") == http.StatusOK }, "readyz 200")
	return base
}

func TestServeWiresAModulesMigrationRoutesHandlersAndJobs(t *testing.T) {
	p := &pings{handled: map[string]bool{}, jobsDone: map[string]bool{}}
	base := startApp(t, []module.Module{p})

	if code := get(t, base+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("healthz = %d", code)
	}
	if code := get(t, base+"/api/v1/pings", ""); code != http.StatusUnauthorized {
		t.Fatalf("an /api/v1 route without a token = %d, want 401", code)
	}

	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/pings", strings.NewReader(`{"note":"hello"}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || created.ID == "" {
		t.Fatalf("POST /api/v1/pings = %d %+v", resp.StatusCode, created)
	}
	waitFor(t, 30*time.Second, func() bool { return p.has(p.handled, created.ID) }, "the module's event handler received ping.created")
	waitFor(t, 30*time.Second, func() bool { return p.has(p.jobsDone, created.ID) }, "the module's job ran")

	doc := body(t, base+"/openapi.json")
	if !strings.Contains(doc, `"/api/v1/pings"`) {
		t.Fatal("the module's route is missing from /openapi.json")
	}
}

// The OpenAPI document of the shipped modules lists every route they mount, and nothing else.
func TestOpenAPIDocumentMatchesTheRoutes(t *testing.T) {
	tdb := dbtest.Create(t)
	cfg := testConfig(t, tdb.URL)
	cfg.ConsoleEnabled = false // the console's HTML pages are not part of the API's document
	mods, err := modules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := newReplica(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), tdb.Open(t), mods, telemetry.Disabled(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(replica.Engine)
	defer srv.Close()
	doc := body(t, srv.URL+"/openapi.json")
	if err := httpapi.CheckOpenAPI(replica.Engine, []byte(doc)); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func body(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
