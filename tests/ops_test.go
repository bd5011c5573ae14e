package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// TestOperationsEndpointsOfTheBinary checks what an operator and a client see first: health,
// readiness, metrics, the OpenAPI document of every module, and a 401 problem without a token.
func TestOperationsEndpointsOfTheBinary(t *testing.T) {
	c := newCluster(t, clusterOptions{Replicas: 1})
	base := c.replicas[0].URL()
	get := func(path string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		if resp, body := get(path); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}

	// Sampled gauges appear after their first sample, which a loaded machine may delay.
	for _, family := range []string{"keelson_outbox_backlog", "keelson_jobs_depth", "keelson_webhooks_due_backlog", "http_requests_total"} {
		hosttest.Eventually(t, 30*time.Second, func() bool {
			resp, body := get("/metrics")
			return resp.StatusCode == http.StatusOK && strings.Contains(string(body), family)
		}, "GET /metrics has no %s", family)
	}

	resp, body := get("/openapi.json")
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("GET /openapi.json: %d %v %.200s", resp.StatusCode, err, body)
	}
	for _, path := range []string{
		"/api/v1/webhooks/subscriptions", "/api/v1/webhooks/events", "/api/v1/webhooks/deliveries/{id}/redeliver",
		"/api/v1/conversations", "/api/v1/conversations/{id}/messages",
		"/api/v1/assistant/proposals", "/api/v1/assistant/proposals/{id}/accept",
	} {
		if _, ok := doc.Paths[path]; !ok {
			t.Errorf("/openapi.json documents no %s", path)
		}
	}

	resp, body = get("/api/v1/webhooks/subscriptions")
	var problem struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
	_ = json.Unmarshal(body, &problem)
	if resp.StatusCode != http.StatusUnauthorized || problem.Code != "unauthorized" || problem.Status != 401 ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("no token: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp, body := get("/api/v1/webhooks/subscriptions", "Authorization", "Bearer wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d %s", resp.StatusCode, body)
	}
}
