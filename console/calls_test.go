package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// apiCalls is how many /api/v1 requests the replica has answered, in-process ones included.
func apiCalls(t testing.TB, g prometheus.Gatherer) int {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range families {
		if f.GetName() != "http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" && strings.HasPrefix(l.GetValue(), "/api/v1/") {
					total += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return total
}

// twentyEndpoints subscribes 20 endpoints, half of them failing, each with a finished delivery.
func twentyEndpoints(t testing.TB, c *cluster) {
	t.Helper()
	ok := newReceiver(t, http.StatusNoContent)
	bad := newReceiver(t, http.StatusInternalServerError)
	for i := range 20 {
		target := ok.URL
		if i%2 == 1 {
			target = bad.URL
		}
		subscribe(t, c.a, fmt.Sprintf("%s/hooks/%d", target, i), fmt.Sprintf("endpoint %d", i))
	}
	publish(t, c.a, map[string]any{"order_id": 1})
	hosttest.Eventually(t, 60*time.Second, func() bool {
		return len(deliveries(t, c.a, "status=pending&limit=200")) == 0
	}, "every delivery finished")
}

func TestTheEndpointsPageWithTwentyEndpointsAsksTheAPIAtMostFiveTimes(t *testing.T) {
	c := startCluster(t)
	twentyEndpoints(t, c)
	w := newWebClient(t)
	w.signIn(c.a.URL, hosttest.Token)

	before := apiCalls(t, c.a.Metrics)
	res := w.send(http.MethodGet, c.a.URL+"/console/endpoints", nil)
	calls := apiCalls(t, c.a.Metrics) - before
	if res.status != http.StatusOK {
		t.Fatalf("endpoints page: %d", res.status)
	}
	if rows := strings.Count(res.body, `class="url"`); rows != 20 {
		t.Fatalf("%d endpoints shown, want 20", rows)
	}
	if !strings.Contains(res.body, "0% ok") || !strings.Contains(res.body, "100% ok") {
		t.Fatalf("the page does not show both the failing and the healthy endpoints' rates:\n%s", res.body)
	}
	if calls > 5 {
		t.Fatalf("the endpoints page asked the API %d times for 20 endpoints, want at most 5", calls)
	}
	t.Logf("endpoints page with 20 endpoints: %d API calls", calls)
}

// BenchmarkTheEndpointsPageWithTwentyEndpoints prints the time of one endpoints page and its API calls.
func BenchmarkTheEndpointsPageWithTwentyEndpoints(b *testing.B) {
	c := startCluster(b)
	twentyEndpoints(b, c)
	w := newWebClient(b)
	w.signIn(c.a.URL, hosttest.Token)
	before := apiCalls(b, c.a.Metrics)
	b.ResetTimer()
	for b.Loop() {
		if res := w.send(http.MethodGet, c.a.URL+"/console/endpoints", nil); res.status != http.StatusOK {
			b.Fatalf("endpoints page: %d", res.status)
		}
	}
	b.ReportMetric(float64(apiCalls(b, c.a.Metrics)-before)/float64(b.N), "api-calls/page")
}
