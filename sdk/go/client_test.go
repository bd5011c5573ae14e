package keelson_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver to drop the test's database

	keelson "github.com/keelson/keelson/sdk/go"
)

const token = "sdk-test-token"

// server is `keelson serve` built from this repository, on a loopback port and a database of its own.
type server struct {
	URL string
}

func adminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func startServer(t *testing.T) *server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts keelson serve on PostgreSQL and RabbitMQ")
	}
	bin := filepath.Join(t.TempDir(), "keelson")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./app")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build keelson: %v\n%s", err, out)
	}
	name := "keelson_sdk_" + randomHex(6)
	t.Cleanup(func() {
		admin, err := sql.Open("pgx", adminURL())
		if err != nil {
			return
		}
		defer admin.Close()
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:5432/%s?sslmode=disable", name)
	if a := os.Getenv("TEST_DATABASE_URL"); a != "" {
		dbURL = a[:len(a)-len("postgres?sslmode=disable")] + name + "?sslmode=disable"
	}
	ns := "sdk" + randomHex(4)
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "HTTP_ADDR="+addr, "API_TOKENS="+token,
		"AMQP_EXCHANGE="+ns, "AMQP_QUEUE_PREFIX="+ns, "WEBHOOKS_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOKS_SWEEP_INTERVAL=300ms", "LOG_LEVEL=warn")
	migrate := exec.CommandContext(t.Context(), bin, "migrate")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("keelson migrate: %v\n%s", err, out)
	}
	var logs bytes.Buffer
	serve := exec.CommandContext(context.Background(), bin, "serve")
	serve.Env, serve.Stdout, serve.Stderr = env, &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
	})
	s := &server{URL: "http://" + addr}
	eventually(t, 60*time.Second, func() bool {
		resp, err := http.Get(s.URL + "/readyz") //nolint:noctx // a probe
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "keelson serve did not become ready:\n%s", &logs)
	return s
}

func eventually(t *testing.T, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(format, args...)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// receiver is a webhook endpoint that keeps the bodies whose signature verifies.
type receiver struct {
	mu         sync.Mutex
	verifier   *keelson.Verifier
	verified   []map[string]any
	refused    int
	lastBody   []byte
	lastHeader http.Header
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.verifier == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	body, err := r.verifier.VerifyRequest(req, 1<<20)
	if err != nil {
		r.refused++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var event map[string]any
	_ = json.Unmarshal(body, &event)
	r.verified = append(r.verified, event)
	r.lastBody, r.lastHeader = body, req.Header.Clone()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.verified)
}

func TestTheGeneratedClientSubscribesPostsListsRedeliversAndTheVerifierAcceptsTheWebhook(t *testing.T) {
	s := startServer(t)
	ctx := t.Context()
	client, err := keelson.NewClientWithResponses(s.URL, keelson.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	rcv := &receiver{}
	endpoint := httptest.NewServer(rcv)
	defer endpoint.Close()

	sub, err := client.CreateWebhookSubscriptionWithResponse(ctx, nil, keelson.CreateWebhookSubscriptionJSONRequestBody{
		Url: endpoint.URL + "/hooks", EventTypes: []string{"order.*"}})
	if err != nil || sub.JSON201 == nil || sub.JSON201.Secret == nil {
		t.Fatalf("create subscription: %v %s", err, body(sub))
	}
	verifier, err := keelson.NewVerifier(*sub.JSON201.Secret)
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	rcv.verifier = verifier
	rcv.mu.Unlock()

	for i := range 3 {
		ev, err := client.PublishWebhookEventWithResponse(ctx, nil, keelson.PublishWebhookEventJSONRequestBody{
			Type: "order.created", Data: map[string]any{"order_id": i}})
		if err != nil || ev.JSON202 == nil || ev.JSON202.Deliveries != 1 {
			t.Fatalf("post event %d: %v %s", i, err, body(ev))
		}
	}
	eventually(t, 60*time.Second, func() bool { return rcv.count() >= 3 }, "the receiver verified %d of 3 webhooks", rcv.count())

	// Pages of one item: All walks the cursors.
	limit := keelson.Limit(1)
	var deliveries []keelson.DeliveryResponse
	for d, err := range keelson.All(ctx, func(ctx context.Context, cursor *string) (keelson.Page[keelson.DeliveryResponse], error) {
		resp, err := client.ListWebhookDeliveriesWithResponse(ctx, &keelson.ListWebhookDeliveriesParams{Limit: &limit, Cursor: cursor})
		if err != nil {
			return keelson.Page[keelson.DeliveryResponse]{}, err
		}
		if resp.JSON200 == nil {
			return keelson.Page[keelson.DeliveryResponse]{}, fmt.Errorf("list deliveries: %s", resp.Body)
		}
		return keelson.Page[keelson.DeliveryResponse]{Items: *resp.JSON200.Items, NextCursor: resp.JSON200.NextCursor}, nil
	}) {
		if err != nil {
			t.Fatal(err)
		}
		deliveries = append(deliveries, d)
	}
	if len(deliveries) != 3 {
		t.Fatalf("listed %d deliveries page by page, want 3", len(deliveries))
	}

	again, err := client.RedeliverWebhookWithResponse(ctx, uuid.MustParse(deliveries[0].Id), nil, keelson.RedeliverWebhookJSONRequestBody{})
	if err != nil || again.JSON202 == nil {
		t.Fatalf("redeliver: %v %s", err, body(again))
	}
	eventually(t, 60*time.Second, func() bool { return rcv.count() >= 4 }, "the redelivery did not arrive verified")

	// The same request with its body changed, or checked against a secret the endpoint does not trust, does not verify.
	rcv.mu.Lock()
	raw, header := rcv.lastBody, rcv.lastHeader
	rcv.mu.Unlock()
	if err := verifier.Verify(raw, header); err != nil {
		t.Fatalf("the received webhook does not verify again: %v", err)
	}
	if err := verifier.Verify(bytes.Replace(raw, []byte("order.created"), []byte("order.canceled"), 1), header); err == nil {
		t.Fatal("a changed body verified")
	}
	other, err := keelson.NewVerifier("whsec_b3RoZXItc2VjcmV0LW9mLTMyLWJ5dGVzLWxvbmctLS0=")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Verify(raw, header); err == nil {
		t.Fatal("a webhook verified with a secret that did not sign it")
	}
	rotated, err := keelson.NewVerifier("whsec_b3RoZXItc2VjcmV0LW9mLTMyLWJ5dGVzLWxvbmctLS0=", *sub.JSON201.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := rotated.Verify(raw, header); err != nil {
		t.Fatalf("during a rotation the old secret no longer verifies: %v", err)
	}
}

// TestTheCommittedDocumentIsTheOneTheServerServes keeps openapi.json, the generator's input, current.
func TestTheCommittedDocumentIsTheOneTheServerServes(t *testing.T) {
	s := startServer(t)
	resp, err := http.Get(s.URL + "/openapi.json") //nolint:noctx // one request
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	served, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, served, committed) {
		if os.Getenv("SDK_UPDATE") == "1" {
			if err := os.WriteFile("openapi.json", served, 0o644); err != nil { //nolint:gosec // a committed source file
				t.Fatal(err)
			}
			t.Log("openapi.json updated: run go generate")
			return
		}
		t.Fatal("sdk/go/openapi.json is not the served document: SDK_UPDATE=1 go test -run Committed . && go generate")
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xa, yb)
}

func body(r interface{ StatusCode() int }) string {
	if r == nil || reflect.ValueOf(r).IsNil() {
		return "no response"
	}
	return fmt.Sprintf("status %d", r.StatusCode())
}
