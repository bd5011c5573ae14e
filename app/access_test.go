package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/examples/notes"
	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// accessReplica serves the shipped modules and the notes example on a fresh database.
func accessReplica(t *testing.T) (*hosttest.Replica, *database.DB) {
	t.Helper()
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	mods, err := modules(cfg)
	require.NoError(t, err)
	mods = append(mods, notes.New())
	sets := migrations.Sets("webhooks", "conversations", "proposals")
	sets = append(sets, database.MigrationSet{Owner: "notes", FS: notes.New().Migrations()})
	db := dbtest.New(t, sets...)
	return hosttest.Start(t, db, hosttest.Options{}, mods...), db
}

type answer struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

// call sends one request with token; body nil sends none.
func call(t *testing.T, method, url, token string, body any) answer {
	t.Helper()
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, reader)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &a.Body)
	return a
}

// createToken makes a token through the admin API with the bootstrap token.
func createToken(t *testing.T, base, tenant string, scopes ...auth.Scope) string {
	t.Helper()
	names := make([]string, len(scopes))
	for i, s := range scopes {
		names[i] = string(s)
	}
	a := call(t, http.MethodPost, base+"/api/v1/admin/tokens", hosttest.Token, map[string]any{"tenant": tenant, "scopes": names})
	require.Equal(t, http.StatusCreated, a.Status, a.Raw)
	return a.Body["token"].(string)
}

func allBut(s auth.Scope) []auth.Scope {
	var out []auth.Scope
	for _, x := range auth.AllScopes {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

type operation struct {
	Method, Path, ID, Scope string
}

// apiOperations are the /api/v1 operations of the served document.
func apiOperations(t *testing.T, base string) []operation {
	t.Helper()
	a := call(t, http.MethodGet, base+"/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, a.Status)
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string                `json:"operationId"`
			Scope       string                `json:"x-required-scope"`
			Security    []map[string][]string `json:"security"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.Raw), &doc))
	var ops []operation
	for path, item := range doc.Paths {
		if !strings.HasPrefix(path, "/api/v1/") {
			continue
		}
		for method, op := range item {
			require.NotEmpty(t, op.Scope, "%s %s declares no scope", method, path)
			require.Equal(t, []map[string][]string{{"bearerAuth": {op.Scope}}}, op.Security, "%s %s shows its scope as its security requirement", method, path)
			ops = append(ops, operation{Method: strings.ToUpper(method), Path: path, ID: op.OperationID, Scope: op.Scope})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Path+ops[i].Method < ops[j].Path+ops[j].Method })
	return ops
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

func TestATokenWithoutTheScopeOfAnOperationGets403InsufficientScopeOnEveryOne(t *testing.T) {
	r, db := accessReplica(t)
	ops := apiOperations(t, r.URL)
	require.Greater(t, len(ops), 30, "every module's operations are in the document")
	lacking := map[string]string{}
	for _, s := range auth.AllScopes {
		lacking[string(s)] = createToken(t, r.URL, "default", allBut(s)...)
	}
	before := rowCounts(t, db)
	for _, op := range ops {
		token, ok := lacking[op.Scope]
		require.True(t, ok, "%s %s needs the unknown scope %q", op.Method, op.Path, op.Scope)
		url := r.URL + pathParam.ReplaceAllStringFunc(op.Path, func(string) string { return uuid.NewString() })
		var body any
		if op.Method != http.MethodGet && op.Method != http.MethodDelete {
			body = map[string]any{}
		}
		a := call(t, op.Method, url, token, body)
		assert.Equal(t, http.StatusForbidden, a.Status, "%s %s (%s) without %s: %s", op.Method, op.Path, op.ID, op.Scope, a.Raw)
		assert.Equal(t, "insufficient_scope", a.Body["code"], "%s %s", op.Method, op.Path)
		assert.Contains(t, a.Header.Get("Content-Type"), "application/problem+json")
	}
	assert.Equal(t, before, rowCounts(t, db), "refused requests write nothing")
}

// rowCounts counts the rows of every table but the bookkeeping ones, to see that nothing was written.
func rowCounts(t *testing.T, db *database.DB) map[string]int {
	t.Helper()
	var tables []string
	require.NoError(t, db.Gorm().Raw(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'
		AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'goose%' AND table_name NOT IN ('api_tokens', 'api_rate_windows', 'jobs', 'schedules')
		ORDER BY 1`).Scan(&tables).Error)
	counts := map[string]int{}
	for _, table := range tables {
		var n int
		require.NoError(t, db.Gorm().Raw(`SELECT count(*) FROM "`+table+`"`).Scan(&n).Error)
		counts[table] = n
	}
	return counts
}

func TestTokensAreManagedThroughTheAdminAPIAndRefusedOnceRevokedOrTheirTenantDisabled(t *testing.T) {
	r, db := accessReplica(t)
	api := r.URL + "/api/v1"

	a := call(t, http.MethodPost, api+"/admin/tenants", hosttest.Token, map[string]any{"name": "acme"})
	require.Equal(t, http.StatusCreated, a.Status, a.Raw)
	acme := a.Body["id"].(string)

	before := rowCounts(t, db)
	var tokens int
	countTokens := func() int {
		require.NoError(t, db.Gorm().Raw(`SELECT count(*) FROM api_tokens`).Scan(&tokens).Error)
		return tokens
	}
	for name, body := range map[string]map[string]any{
		"an unknown scope":   {"tenant": "acme", "scopes": []string{"webhooks:read", "webhooks:destroy"}},
		"no scope":           {"tenant": "acme", "scopes": []string{}},
		"a bad lifetime":     {"tenant": "acme", "scopes": []string{"webhooks:read"}, "expires_in": "soon"},
		"an unknown tenant":  {"tenant": "nobody", "scopes": []string{"webhooks:read"}},
		"an unknown field":   {"tenant": "acme", "scopes": []string{"webhooks:read"}, "role": "root"},
		"a scope not a list": {"tenant": "acme", "scopes": "webhooks:read"},
	} {
		a := call(t, http.MethodPost, api+"/admin/tokens", hosttest.Token, body)
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity}, a.Status, "%s: %s", name, a.Raw)
		assert.Contains(t, a.Header.Get("Content-Type"), "application/problem+json", name)
	}
	assert.Zero(t, countTokens(), "refused creations write nothing")
	assert.Equal(t, before, rowCounts(t, db))

	a = call(t, http.MethodPost, api+"/admin/tokens", hosttest.Token,
		map[string]any{"tenant": "acme", "name": "acme admin", "scopes": []string{"admin", "webhooks:read"}, "expires_in": "30d"})
	require.Equal(t, http.StatusCreated, a.Status, a.Raw)
	acmeAdmin, acmeAdminID := a.Body["token"].(string), a.Body["id"].(string)
	assert.Equal(t, acme, a.Body["tenant_id"])
	assert.NotNil(t, a.Body["expires_at"])

	// The token string is shown once: lists never carry it.
	list := call(t, http.MethodGet, api+"/admin/tokens", hosttest.Token, nil)
	require.Equal(t, http.StatusOK, list.Status)
	assert.NotContains(t, list.Raw, strings.SplitN(acmeAdmin, "_", 3)[2])
	assert.Contains(t, list.Raw, acmeAdminID)

	// A tenant's admin token manages its own tenant's tokens only, and no tenants.
	a = call(t, http.MethodPost, api+"/admin/tokens", acmeAdmin, map[string]any{"scopes": []string{"webhooks:read"}})
	require.Equal(t, http.StatusCreated, a.Status, a.Raw)
	reader, readerID := a.Body["token"].(string), a.Body["id"].(string)
	assert.Equal(t, acme, a.Body["tenant_id"])
	a = call(t, http.MethodPost, api+"/admin/tokens", acmeAdmin, map[string]any{"tenant": "default", "scopes": []string{"admin"}})
	assert.Equal(t, http.StatusNotFound, a.Status, "another tenant is not found: %s", a.Raw)
	defaultToken := createToken(t, r.URL, "default", auth.WebhooksRead)
	a = call(t, http.MethodGet, api+"/admin/tokens", acmeAdmin, nil)
	require.Equal(t, http.StatusOK, a.Status)
	assert.Len(t, a.Body["items"], 2, "acme's admin sees acme's two tokens only: %s", a.Raw)
	for _, it := range a.Body["items"].([]any) {
		assert.Equal(t, acme, it.(map[string]any)["tenant_id"])
	}
	defaultID := strings.SplitN(defaultToken, "_", 3)[1]
	defaultUUID := uuid.MustParse(defaultID).String()
	a = call(t, http.MethodPost, api+"/admin/tokens/"+defaultUUID+"/revoke", acmeAdmin, nil)
	assert.Equal(t, http.StatusNotFound, a.Status, "another tenant's token is not found: %s", a.Raw)
	for _, path := range []string{"/admin/tenants", "/admin/tenants/" + acme + "/disable"} {
		method := http.MethodGet
		if strings.HasSuffix(path, "disable") {
			method = http.MethodPost
		}
		a = call(t, method, api+path, acmeAdmin, nil)
		assert.Equal(t, http.StatusForbidden, a.Status, "%s: %s", path, a.Raw)
		assert.Equal(t, "insufficient_scope", a.Body["code"])
	}

	// Using, revoking, refusing.
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, api+"/webhooks/subscriptions", reader, nil).Status)
	a = call(t, http.MethodPost, api+"/webhooks/subscriptions", reader, map[string]any{"url": "https://example.com/h", "event_types": []string{"*"}})
	assert.Equal(t, http.StatusForbidden, a.Status)
	assert.Equal(t, "insufficient_scope", a.Body["code"])
	a = call(t, http.MethodPost, api+"/admin/tokens/"+readerID+"/revoke", acmeAdmin, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Raw)
	assert.NotNil(t, a.Body["revoked_at"])
	for name, token := range map[string]string{
		"revoked":   reader,
		"malformed": "kt_nope",
		"unknown":   "kt_" + strings.ReplaceAll(uuid.NewString(), "-", "") + "_" + strings.SplitN(reader, "_", 3)[2],
		"tampered":  reader[:len(reader)-2] + "xx",
		"missing":   "",
	} {
		a := call(t, http.MethodGet, api+"/webhooks/subscriptions", token, nil)
		assert.Equal(t, http.StatusUnauthorized, a.Status, name)
		assert.Equal(t, "unauthorized", a.Body["code"], name)
		assert.Equal(t, "Bearer", a.Header.Get("WWW-Authenticate"), name)
	}

	// A disabled tenant's tokens get 403 until it is enabled again; the default tenant cannot be disabled here.
	a = call(t, http.MethodPost, api+"/admin/tenants/"+acme+"/disable", hosttest.Token, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Raw)
	assert.Equal(t, true, a.Body["disabled"])
	a = call(t, http.MethodGet, api+"/webhooks/subscriptions", acmeAdmin, nil)
	assert.Equal(t, http.StatusForbidden, a.Status)
	assert.Equal(t, "tenant_disabled", a.Body["code"])
	a = call(t, http.MethodPost, api+"/admin/tenants/"+acme+"/enable", hosttest.Token, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Raw)
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, api+"/webhooks/subscriptions", acmeAdmin, nil).Status)
	a = call(t, http.MethodPost, api+"/admin/tenants/00000000-0000-0000-0000-000000000001/disable", hosttest.Token, nil)
	assert.Equal(t, http.StatusConflict, a.Status, a.Raw)

	a = call(t, http.MethodGet, api+"/admin/tenants", hosttest.Token, nil)
	require.Equal(t, http.StatusOK, a.Status)
	assert.Contains(t, a.Raw, `"name":"acme"`)
	assert.Contains(t, a.Raw, `"name":"default"`)
}

func TestTheTokensAndTenantsCommandsCreateListRevokeDisableAndEnable(t *testing.T) {
	d := dbtest.Create(t)
	t.Setenv("DATABASE_URL", d.URL)
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	keelson := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, &out)
		return out.String(), err
	}

	out, err := keelson("tenants", "create", "acme")
	require.NoError(t, err)
	assert.Contains(t, out, `"name":"acme"`)
	out, err = keelson("tokens", "create", "--tenant", "acme", "--scope", "webhooks:read", "--scope", "webhooks:write,conversations:read", "--name", "ci", "--expires", "30d")
	require.NoError(t, err, out)
	secret := regexp.MustCompile(`kt_[0-9a-f]{32}_\S+`).FindString(out)
	require.NotEmpty(t, secret, out)
	id := uuid.MustParse(strings.SplitN(secret, "_", 3)[1]).String()

	_, err = keelson("tokens", "create", "--tenant", "acme", "--scope", "webhooks:everything")
	var ve *apperr.ValidationError
	assert.ErrorAs(t, err, &ve, "an unknown scope is refused")
	_, err = keelson("tokens", "create", "--scope", "webhooks:read")
	assert.ErrorIs(t, err, errUsage, "a tenant is required")

	out, err = keelson("tokens", "list", "--tenant", "acme")
	require.NoError(t, err)
	assert.Contains(t, out, id)
	assert.Contains(t, out, "webhooks:read,webhooks:write,conversations:read")
	assert.NotContains(t, out, strings.SplitN(secret, "_", 3)[2], "the secret is shown only by create")

	out, err = keelson("tokens", "revoke", id)
	require.NoError(t, err)
	assert.Contains(t, out, "revoked")
	out, err = keelson("tenants", "disable", "acme")
	require.NoError(t, err)
	assert.Contains(t, out, `"disabled":true`)
	out, err = keelson("tenants", "enable", "acme")
	require.NoError(t, err)
	assert.Contains(t, out, `"disabled":false`)
	out, err = keelson("tenants", "list")
	require.NoError(t, err)
	assert.Contains(t, out, "default")
	assert.Contains(t, out, "acme")
}

func TestATokenOverItsRateLimitGets429WithRetryAfterOnEveryReplica(t *testing.T) {
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	d := dbtest.Create(t, migrations.Sets("webhooks", "conversations", "proposals")...)
	const limit = 6
	start := func() *hosttest.Replica {
		mods, err := modules(cfg)
		require.NoError(t, err)
		return hosttest.Start(t, d.Open(t), hosttest.Options{RateLimit: limit, RateWindow: time.Minute}, mods...)
	}
	a, b := start(), start()
	heavy := createToken(t, a.URL, "default", auth.WebhooksRead)
	light := createToken(t, a.URL, "default", auth.WebhooksRead)

	// Counting must not straddle two windows: start early in one.
	for time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)) < 15*time.Second {
		time.Sleep(250 * time.Millisecond)
	}
	for i := range limit {
		r := []*hosttest.Replica{a, b}[i%2]
		got := call(t, http.MethodGet, r.URL+"/api/v1/webhooks/subscriptions", heavy, nil)
		require.Equal(t, http.StatusOK, got.Status, "request %d of %d: %s", i+1, limit, got.Raw)
	}
	for _, r := range []*hosttest.Replica{a, b} {
		got := call(t, http.MethodGet, r.URL+"/api/v1/webhooks/subscriptions", heavy, nil)
		require.Equal(t, http.StatusTooManyRequests, got.Status, "the replicas count into one window: %s", got.Raw)
		assert.Equal(t, "rate_limited", got.Body["code"])
		retry, err := strconv.Atoi(got.Header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After %q", got.Header.Get("Retry-After"))
		assert.True(t, retry >= 1 && retry <= 60, "Retry-After %d is within the window", retry)
	}
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, b.URL+"/api/v1/webhooks/subscriptions", light, nil).Status,
		"another token has its own count")
}

func TestMetricsAddrServesMetricsOnItsOwnListenerOnly(t *testing.T) {
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	mods, err := modules(cfg)
	require.NoError(t, err)
	listener, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := hosttest.Start(t, dbtest.New(t, migrations.Sets("webhooks", "conversations", "proposals")...),
		hosttest.Options{MetricsListener: listener}, mods...)

	got := call(t, http.MethodGet, "http://"+listener.Addr().String()+"/metrics", "", nil)
	require.Equal(t, http.StatusOK, got.Status)
	assert.Contains(t, got.Raw, "keelson_build_info")
	assert.Equal(t, http.StatusNotFound, call(t, http.MethodGet, r.URL+"/metrics", "", nil).Status, "not on the API listener")
	doc := call(t, http.MethodGet, r.URL+"/openapi.json", "", nil)
	assert.NotContains(t, doc.Raw, `"/metrics"`, "nor in its document")
}

func TestProfilesAreServedOnTheMetricsListenerOnlyWhenAsked(t *testing.T) {
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	mods, err := modules(cfg)
	require.NoError(t, err)
	db := dbtest.New(t, migrations.Sets("webhooks", "conversations", "proposals")...)
	for _, on := range []bool{false, true} {
		listener, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		require.NoError(t, err)
		r := hosttest.Start(t, db, hosttest.Options{MetricsListener: listener, MetricsPprof: on}, mods...)
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		got := call(t, http.MethodGet, "http://"+listener.Addr().String()+"/debug/pprof/goroutine?debug=1", "", nil)
		assert.Equal(t, want, got.Status, "METRICS_PPROF=%v, on the metrics listener", on)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
			// net/http/pprof registers these on http.DefaultServeMux too; no listener serves that mux.
			assert.Equal(t, http.StatusNotFound, call(t, http.MethodGet, r.URL+path, "", nil).Status,
				"%s never on the API listener (METRICS_PPROF=%v)", path, on)
		}
		assert.Equal(t, http.StatusOK, call(t, http.MethodGet, "http://"+listener.Addr().String()+"/metrics", "", nil).Status)
		r.Stop()
	}
}
