package tests

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Two AES-256 keys for the tests only.
const (
	testKey1 = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	testKey2 = "k2:ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
)

// securityEnv is a fresh database migrated by the binary and the environment of its replicas.
func securityEnv(t *testing.T, extra map[string]string) (*emptyDatabase, map[string]string) {
	t.Helper()
	if testing.Short() {
		t.Skip("black-box tests need PostgreSQL, RabbitMQ and a few seconds")
	}
	db := newEmptyDatabase(t)
	ns := newNamespace()
	env := map[string]string{
		"DATABASE_URL":                   db.URL,
		"AMQP_URL":                       brokerURL(),
		"AMQP_EXCHANGE":                  ns,
		"AMQP_QUEUE_PREFIX":              ns,
		"API_TOKENS":                     apiToken,
		"WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",
		"LOG_FORMAT":                     "json",
	}
	for k, v := range extra {
		env[k] = v
	}
	runMigrate(t, env)
	return db, env
}

// call sends one request to a replica and returns its status, headers and body.
func call(t *testing.T, base, method, path, token, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+"/api/v1"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

func field(t *testing.T, raw []byte, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return m[name]
}

// openDB connects to the test's database, for looking at what it stores.
func openDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestSigningSecretsNeverReachTheIdempotencyCacheAndReplaysOnTheOtherReplicaLeaveThemOut(t *testing.T) {
	db, env := securityEnv(t, map[string]string{"KEELSON_ENCRYPTION_KEYS": testKey1})
	r1, r2 := startReplica(t, "replica1", env), startReplica(t, "replica2", env)
	body := `{"url":"http://127.0.0.1:9/hook","event_types":["order.*"]}`

	createKey := uuid.NewString()
	status, _, created := call(t, r1.URL(), http.MethodPost, "/webhooks/subscriptions", apiToken, body, "Idempotency-Key", createKey)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, created)
	}
	id, secret := field(t, created, "id").(string), field(t, created, "secret").(string)
	if secret == "" {
		t.Fatal("the first answer shows the secret")
	}
	status, header, replayed := call(t, r2.URL(), http.MethodPost, "/webhooks/subscriptions", apiToken, body, "Idempotency-Key", createKey)
	if status != http.StatusCreated || header.Get("Idempotent-Replayed") != "true" || header.Get("Idempotent-Redacted") != "secret" {
		t.Fatalf("replay of create: %d %v %s", status, header, replayed)
	}
	if field(t, replayed, "id") != id || field(t, replayed, "secret") != nil {
		t.Fatalf("the replay is the same subscription, without its secret: %s", replayed)
	}

	rotateKey := uuid.NewString()
	status, _, rotated := call(t, r2.URL(), http.MethodPost, "/webhooks/subscriptions/"+id+"/rotate-secret", apiToken, "", "Idempotency-Key", rotateKey)
	if status != http.StatusOK {
		t.Fatalf("rotate: %d %s", status, rotated)
	}
	newSecret := field(t, rotated, "secret").(string)
	status, header, replayed = call(t, r1.URL(), http.MethodPost, "/webhooks/subscriptions/"+id+"/rotate-secret", apiToken, "", "Idempotency-Key", rotateKey)
	if status != http.StatusOK || header.Get("Idempotent-Redacted") != "secret" || field(t, replayed, "secret") != nil {
		t.Fatalf("replay of rotate: %d %v %s", status, header, replayed)
	}

	var dump string
	if err := openDB(t, db.URL).QueryRowContext(t.Context(),
		`SELECT coalesce(string_agg(k::text || convert_from(coalesce(k.body, ''), 'UTF8'), ' '), '') FROM idempotency_keys k`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{secret, newSecret, strings.TrimPrefix(secret, "whsec_"), strings.TrimPrefix(newSecret, "whsec_")} {
		if strings.Contains(dump, s) {
			t.Fatalf("idempotency_keys holds a signing secret: %s", dump)
		}
	}
}

// serveExpectingRefusal runs `keelson serve` and returns its output once it exits, failing if it serves.
func serveExpectingRefusal(t *testing.T, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, keelson(t), "serve")
	cmd.Env = environ(env)
	cmd.Env = append(cmd.Env, fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", freePort(t)), "INSTANCE_ID=refused")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("keelson serve did not refuse to start:\n%s", out)
	}
	if err == nil {
		t.Fatalf("keelson serve exited 0:\n%s", out)
	}
	return string(out)
}

func TestAReplicaWithoutTheKeyRefusesToStartAndReencryptRefusesAKeyARunningReplicaLacks(t *testing.T) {
	_, env := securityEnv(t, map[string]string{"KEELSON_ENCRYPTION_KEYS": testKey1})
	r1 := startReplica(t, "replica1", env)
	body := `{"url":"http://127.0.0.1:9/hook","event_types":["order.*"],"headers":{"Authorization":"Bearer x"}}`
	if status, _, raw := call(t, r1.URL(), http.MethodPost, "/webhooks/subscriptions", apiToken, body); status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, raw)
	}

	without := map[string]string{}
	for k, v := range env {
		without[k] = v
	}
	delete(without, "KEELSON_ENCRYPTION_KEYS")
	out := serveExpectingRefusal(t, without)
	if !strings.Contains(out, "KEELSON_ENCRYPTION_KEYS lacks key(s) k1") {
		t.Fatalf("the refusal names the missing key for the operator:\n%s", out)
	}
	if strings.Contains(out, "MDEy") {
		t.Fatalf("the refusal shows key material:\n%s", out)
	}

	// Sealing under k2 while replica1 (k1 only) runs: refused, as a replica starting with k2 first is.
	withK2 := map[string]string{}
	for k, v := range env {
		withK2[k] = v
	}
	withK2["KEELSON_ENCRYPTION_KEYS"] = testKey2 + "," + testKey1
	cmd := exec.CommandContext(t.Context(), keelson(t), "secrets", "reencrypt")
	cmd.Env = environ(withK2)
	raw, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(raw), "replica(s) replica1 do not hold key k2") {
		t.Fatalf("secrets reencrypt under k2 with replica1 running: err %v\n%s", err, raw)
	}
	out = serveExpectingRefusal(t, withK2)
	if !strings.Contains(out, "seals with key k2, which running replica(s) replica1 do not hold") {
		t.Fatalf("a replica sealing with k2 while replica1 lacks it:\n%s", out)
	}

	// The documented order: k2 second everywhere, then first, then reencrypt.
	env["KEELSON_ENCRYPTION_KEYS"] = testKey1 + "," + testKey2
	r1.Terminate(30 * time.Second)
	startReplica(t, "replica1", env)
	startReplica(t, "replica2", withK2)
	cmd = exec.CommandContext(t.Context(), keelson(t), "secrets", "reencrypt")
	cmd.Env = environ(withK2)
	if raw, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(raw, []byte("1 row(s) rewritten under key k2")) {
		t.Fatalf("secrets reencrypt once every replica holds k2: %v\n%s", err, raw)
	}
}

func TestMadeUpTokensFromOneAddressGet429AndMalformedInputGets4xxNamingTheField(t *testing.T) {
	_, env := securityEnv(t, map[string]string{"API_AUTH_FAILURE_LIMIT": "5/1m"})
	r1, r2 := startReplica(t, "replica1", env), startReplica(t, "replica2", env)
	for i := range 5 {
		bad := fmt.Sprintf("kt_%s_guess%d", strings.ReplaceAll(uuid.NewString(), "-", ""), i)
		if status, _, raw := call(t, r1.URL(), http.MethodGet, "/webhooks/subscriptions", bad, ""); status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s", i+1, status, raw)
		}
	}
	bad := "kt_" + strings.ReplaceAll(uuid.NewString(), "-", "") + "_guess"
	status, header, raw := call(t, r1.URL(), http.MethodGet, "/webhooks/subscriptions", bad, "")
	if status != http.StatusTooManyRequests || header.Get("Retry-After") == "" || field(t, raw, "code") != "rate_limited" {
		t.Fatalf("past the limit: %d %v %s", status, header, raw)
	}
	if status, _, raw := call(t, r1.URL(), http.MethodGet, "/webhooks/subscriptions", apiToken, ""); status != http.StatusOK {
		t.Fatalf("a bootstrap token still passes: %d %s", status, raw)
	}

	// Ambiguous bodies: 422 naming the field, nothing created.
	for _, body := range []string{
		`{"url":"http://127.0.0.1:9/a","URL":"http://127.0.0.1:9/b","event_types":["*"]}`,
		`{"url":"http://127.0.0.1:9/a","url":"http://127.0.0.1:9/b","event_types":["*"]}`,
		`{"URL":"http://127.0.0.1:9/a","event_types":["*"]}`,
	} {
		status, _, raw := call(t, r2.URL(), http.MethodPost, "/webhooks/subscriptions", apiToken, body)
		if status != http.StatusUnprocessableEntity || (!strings.Contains(string(raw), `"field":"url"`) && !strings.Contains(string(raw), `"field":"URL"`)) {
			t.Fatalf("%s: %d %s", body, status, raw)
		}
	}
	if _, _, raw := call(t, r2.URL(), http.MethodGet, "/webhooks/subscriptions", apiToken, ""); !bytes.Contains(raw, []byte(`"items":[]`)) {
		t.Fatalf("an ambiguous body created something: %s", raw)
	}

	// Malformed cursors on every list: 400 invalid_query on cursor, never a 500.
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	id := uuid.NewString()
	cursors := []string{"not-a-cursor!", enc(`null`), enc(`[1]`), enc(`{"after":"` + id + `"}{}`), enc(`{"after":"` + id + `","after":"` + id + `"}`),
		enc(`{"AFTER":"` + id + `"}`), enc(`{"after":42}`), enc(`{"after":"\u0000"}`), enc(`{"before":"x","created_at":"yesterday"}`)}
	lists := []string{"/webhooks/subscriptions", "/webhooks/deliveries", "/webhooks/event-types", "/conversations", "/assistant/proposals",
		"/admin/tokens", "/admin/tenants"}
	for _, list := range lists {
		for _, cursor := range cursors {
			status, _, raw := call(t, r1.URL(), http.MethodGet, list+"?cursor="+cursor, apiToken, "")
			if status != http.StatusBadRequest || field(t, raw, "code") != "invalid_query" || !bytes.Contains(raw, []byte(`"field":"cursor"`)) {
				t.Errorf("%s?cursor=%s: %d %s", list, cursor, status, raw)
			}
		}
	}
}
