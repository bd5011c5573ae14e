package webhooks

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestCustomHeadersAreSentWithEveryAttemptAndRedactedOnReads(t *testing.T) {
	a := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database, bus: true, jobs: true})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	r := a.call(http.MethodPost, "/subscriptions", map[string]any{"url": rc.URL, "event_types": []string{"*"},
		"headers": map[string]string{"authorization": "Bearer s3cret-token", "X-Tenant": "acme", "User-Agent": "acme-hooks"}})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	require.NotContains(t, string(r.body), "s3cret-token")
	id := r.json(t)["id"].(string)
	want := map[string]any{"Authorization": "[redacted]", "X-Tenant": "[redacted]", "User-Agent": "[redacted]"}
	require.Equal(t, want, r.json(t)["headers"])
	for _, h := range []*harness{a, b} {
		got := h.statusOf(id)
		require.Equal(t, want, got["headers"])
		list := h.call(http.MethodGet, "/subscriptions", nil)
		require.NotContains(t, string(list.body), "s3cret-token")
	}

	eventID := a.publish("headers.check", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { d, _ := deliveryOf(t, a, eventID); return d.Status == StatusSucceeded }, "delivered")
	require.Equal(t, 2, rc.count())
	for _, req := range rc.received() {
		require.Equal(t, "Bearer s3cret-token", req.header.Get("Authorization"), "every attempt carries the headers")
		require.Equal(t, "acme", req.header.Get("X-Tenant"))
		require.Equal(t, "acme-hooks", req.header.Get("User-Agent"))
		require.Equal(t, "application/json", req.header.Get("Content-Type"))
		require.Equal(t, eventID, req.header.Get("webhook-id"))
	}

	r = b.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"headers": map[string]string{}})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, map[string]any{}, r.json(t)["headers"])
	a.publish("headers.check", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { return rc.count() == 3 }, "third request")
	require.Empty(t, rc.received()[2].header.Get("Authorization"), "removed headers are no longer sent")
}

func TestRefusedCustomHeadersGet422AndWriteNothing(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	id, _ := h.subscribe("https://example.com/h", "*")
	before := h.statusOf(id)
	many := map[string]string{}
	for i := range 11 {
		many[fmt.Sprintf("X-H%d", i)] = "v"
	}
	for name, headers := range map[string]any{
		"eleven":            many,
		"host":              map[string]string{"Host": "evil.example"},
		"content-length":    map[string]string{"content-length": "5"},
		"content-type":      map[string]string{"Content-Type": "text/plain"},
		"webhook-*":         map[string]string{"Webhook-Signature": "v1,forged"},
		"hop-by-hop":        map[string]string{"Connection": "close"},
		"transfer-encoding": map[string]string{"Transfer-Encoding": "chunked"},
		"line break":        map[string]string{"X-A": "a\r\nX-Injected: 1"},
		"bad name":          map[string]string{"X A": "b"},
		"empty value":       map[string]string{"X-A": ""},
		"too large":         map[string]string{"X-A": strings.Repeat("a", 4000), "X-B": strings.Repeat("b", 200)},
		"twice":             map[string]string{"x-a": "1", "X-A": "2"},
		"not an object":     []string{"X-A"},
	} {
		r := h.call(http.MethodPost, "/subscriptions", map[string]any{"url": "https://example.com/x", "event_types": []string{"*"}, "headers": headers})
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", name, r.body)
		require.Equal(t, "application/problem+json", strings.Split(r.header.Get("Content-Type"), ";")[0])
		r = h.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"headers": headers})
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", name, r.body)
	}
	require.Equal(t, int64(1), hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_subscriptions"))
	require.Equal(t, before, h.statusOf(id))
}
