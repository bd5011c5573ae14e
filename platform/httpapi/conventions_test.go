package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
)

func conventionsServer(t *testing.T, logs io.Writer, origins ...string) *httptest.Server {
	t.Helper()
	engine, api, err := httpapi.NewEngine(httpapi.Options{
		Logger:             slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Tokens:             []string{token},
		Metrics:            prometheus.NewRegistry(),
		CORSAllowedOrigins: origins,
	})
	if err != nil {
		t.Fatal(err)
	}
	api.GET("/things/:id", func(c *gin.Context) {
		c.Header("ETag", `"7"`)
		c.JSON(http.StatusOK, gin.H{"id": c.Param("id")})
	})
	api.POST("/things", func(c *gin.Context) { c.Status(http.StatusCreated) })
	srv := httptest.NewServer(engine)
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// HEAD answers every GET route, the engine's and the modules', with the GET's status and headers
// and no body; a HEAD without a GET route is 404 like any unknown route.
func TestHeadAnswersEveryGetRouteWithoutABody(t *testing.T) {
	srv := conventionsServer(t, io.Discard)
	auth := map[string]string{"Authorization": "Bearer " + token}
	cases := []struct {
		path   string
		header map[string]string
		status int
	}{
		{"/healthz", nil, http.StatusOK},
		{"/metrics", nil, http.StatusOK},
		{"/openapi.json", nil, http.StatusOK},
		{"/api/v1/things/42", auth, http.StatusOK},
		{"/api/v1/things/42", nil, http.StatusUnauthorized},
		{"/api/v1/things", auth, http.StatusNotFound}, // POST only
		{"/nowhere", nil, http.StatusNotFound},
	}
	for _, tc := range cases {
		get, _ := do(t, http.MethodGet, srv.URL+tc.path, tc.header)
		head, body := do(t, http.MethodHead, srv.URL+tc.path, tc.header)
		if head.StatusCode != tc.status || get.StatusCode != tc.status {
			t.Errorf("%s: HEAD %d, GET %d, want %d", tc.path, head.StatusCode, get.StatusCode, tc.status)
		}
		if body != "" {
			t.Errorf("HEAD %s sent a body: %q", tc.path, body)
		}
		if got, want := head.Header.Get("Content-Type"), get.Header.Get("Content-Type"); got != want {
			t.Errorf("HEAD %s: Content-Type %q, GET's is %q", tc.path, got, want)
		}
	}
	head, _ := do(t, http.MethodHead, srv.URL+"/api/v1/things/42", auth)
	if head.Header.Get("ETag") != `"7"` || head.Header.Get(httpapi.RequestIDHeader) == "" {
		t.Fatalf("HEAD lost the GET's headers: %v", head.Header)
	}
	_, metrics := do(t, http.MethodGet, srv.URL+"/metrics", nil)
	if !strings.Contains(metrics, `http_requests_total{method="HEAD",route="/api/v1/things/:id",status="200"} 2`) {
		t.Fatalf("each HEAD is counted once, under HEAD and its route template:\n%s", grepLines(metrics, "http_requests_total"))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestCORSAnswersOnlyTheAllowedOrigins(t *testing.T) {
	const allowed = "https://console.example.com"
	srv := conventionsServer(t, io.Discard, allowed)
	auth := map[string]string{"Authorization": "Bearer " + token}

	resp, _ := do(t, http.MethodGet, srv.URL+"/api/v1/things/1", map[string]string{"Authorization": auth["Authorization"], "Origin": allowed})
	if resp.Header.Get("Access-Control-Allow-Origin") != allowed || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "ETag") {
		t.Fatalf("allowed origin: %v", resp.Header)
	}
	resp, _ = do(t, http.MethodOptions, srv.URL+"/api/v1/things", map[string]string{
		"Origin": allowed, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"})
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != allowed ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight of an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}

	for _, origin := range []string{"https://evil.example.com", "https://console.example.com.evil.net", "null"} {
		resp, _ = do(t, http.MethodGet, srv.URL+"/api/v1/things/1", map[string]string{"Authorization": auth["Authorization"], "Origin": origin})
		if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
			t.Fatalf("origin %s got Access-Control-Allow-Origin %q", origin, v)
		}
		resp, _ = do(t, http.MethodOptions, srv.URL+"/api/v1/things", map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST"})
		if resp.StatusCode == http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("preflight of origin %s: %d %v", origin, resp.StatusCode, resp.Header)
		}
	}

	none := conventionsServer(t, io.Discard)
	resp, _ = do(t, http.MethodGet, none.URL+"/healthz", map[string]string{"Origin": allowed})
	for k := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Fatalf("no origins allowed by default, yet %s was sent", k)
		}
	}
	if _, _, err := httpapi.NewEngine(httpapi.Options{Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(),
		CORSAllowedOrigins: []string{"https://ok.example.com/path"}}); err == nil {
		t.Fatal("an origin with a path must be refused")
	}
}

// Probes and requests without a valid token are routine: they are logged at DEBUG, so INFO keeps
// the requests worth reading.
func TestProbesAndUnauthorizedRequestsAreLoggedAtDebug(t *testing.T) {
	var logs hosttest.LogBuffer
	srv := conventionsServer(t, &logs)
	do(t, http.MethodGet, srv.URL+"/healthz", nil)
	do(t, http.MethodGet, srv.URL+"/readyz", nil)
	do(t, http.MethodGet, srv.URL+"/api/v1/things/1", nil)
	do(t, http.MethodGet, srv.URL+"/api/v1/things/2", map[string]string{"Authorization": "Bearer " + token})
	levels := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct {
			Msg, Level, Path string
			Status           int
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Msg != "http request" {
			continue
		}
		levels[rec.Path] = rec.Level
	}
	want := map[string]string{"/healthz": "DEBUG", "/readyz": "DEBUG", "/api/v1/things/1": "DEBUG", "/api/v1/things/2": "INFO"}
	for path, level := range want {
		if levels[path] != level {
			t.Errorf("%s logged at %q, want %s (all: %v)", path, levels[path], level, levels)
		}
	}
}
