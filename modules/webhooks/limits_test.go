package webhooks

import (
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// arrivals records when each request reached a receiver.
type arrivals struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *arrivals) add() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.times = append(a.times, time.Now())
}

// busiestSecond is the most requests any one-second window saw.
func (a *arrivals) busiestSecond() int {
	a.mu.Lock()
	ts := append([]time.Time(nil), a.times...)
	a.mu.Unlock()
	return busiestSecond(ts)
}

func busiestSecond(ts []time.Time) int {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	most, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= time.Second {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

func TestARateLimitOf10PerSecondHoldsAcrossTwoReplicasAndAll300EventsArrive(t *testing.T) {
	const events, rate = 300, 10
	a := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database, bus: true, jobs: true})
	var seen arrivals
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		seen.add()
		w.WriteHeader(http.StatusNoContent)
	})
	r := a.call(http.MethodPost, "/subscriptions", map[string]any{"url": rc.URL, "event_types": []string{"*"}, "rate_limit": rate})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	require.Equal(t, float64(rate), r.json(t)["rate_limit"])

	ctx := tenantContext()
	start := time.Now()
	for i := range events {
		h := a
		if i%2 == 1 {
			h = b
		}
		_, err := h.svc.PublishEvent(ctx, EventInput{Type: "rate.check", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	hosttest.Eventually(t, 3*time.Minute, func() bool {
		return hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'") == events
	}, "all %d delivered", events)
	took := time.Since(start)

	ids := map[string]bool{}
	for _, req := range rc.received() {
		ids[req.header.Get("webhook-id")] = true
	}
	require.Len(t, ids, events, "every event arrived")
	require.Equal(t, events, rc.count(), "once each")
	var started []time.Time
	require.NoError(t, a.db.Gorm().Raw("SELECT started_at FROM webhook_attempts").Scan(&started).Error)
	// A send's recorded start and its arrival both follow its slot by the machine's scheduling delay;
	// under the race detector on a loaded machine that delay reaches 100 ms and more, enough to put one
	// more request in a window (at 10/s the busiest window already holds the 11 the limit allows).
	require.LessOrEqual(t, busiestSecond(started), rate+1+receiverJitter, "no one-second window of sends started by the two replicas above the limit (+1)")
	busiest := seen.busiestSecond()
	require.LessOrEqual(t, busiest, rate+1+receiverJitter, "no one-second window at the receiver above the limit (+1)")
	require.Equal(t, int64(events), hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_attempts"), "waiting spent no attempt")
	require.Zero(t, hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries WHERE attempt_count <> 1"))
	putBack := hosttest.Metric(t, a.registry, "keelson_webhooks_put_back_total", "reason", "rate_limit") +
		hosttest.Metric(t, b.registry, "keelson_webhooks_put_back_total", "reason", "rate_limit")
	t.Logf("%d events in %s, busiest second %d requests at the receiver, %d started, %.0f requests put back to wait for their slot", events, took, busiest, busiestSecond(started), putBack)
	require.GreaterOrEqual(t, took, time.Duration(events/rate-2)*time.Second)
}

func TestStalledEndpointsOnTwoReplicasLeaveSendingCapacityToAHealthyOne(t *testing.T) {
	cfg := testConfig()
	// Stalled sends hang for a minute: the healthy deliveries must get through well within that however slow the machine.
	cfg.SendTimeout, cfg.ClaimLease = time.Minute, 2*time.Minute
	cfg.Concurrency = 8 // per replica: the stalled endpoints alone could hold every handler
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	b := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true})
	stalled := hangingEndpoints(t, a, 10, "stalled.*")
	healthy := newReceiver(t, nil)
	a.subscribe(healthy.URL, "healthy.*")
	ctx := tenantContext()
	// The healthy endpoint has answered before: both replicas know it as fast.
	for i := range 4 {
		h := a
		if i%2 == 1 {
			h = b
		}
		_, err := h.svc.PublishEvent(ctx, EventInput{Type: "healthy.tick", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	hosttest.Eventually(t, 20*time.Second, func() bool { return healthy.count() == 4 }, "healthy endpoint known")
	for range 4 {
		_, err := a.svc.PublishEvent(ctx, EventInput{Type: "stalled.tick", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	hosttest.Eventually(t, 20*time.Second, func() bool { return requestsReached(stalled) >= 4 },
		"stalled endpoints hold sends in flight on both replicas")

	// While those sends hang (a minute), the healthy endpoint's events go through at once.
	started := time.Now()
	const healthyEvents = 40
	before := healthy.count()
	for i := range healthyEvents {
		h := a
		if i%2 == 1 {
			h = b
		}
		_, err := h.svc.PublishEvent(ctx, EventInput{Type: "healthy.tick", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	hosttest.Eventually(t, 45*time.Second, func() bool { return healthy.count() == before+healthyEvents }, "healthy deliveries sent")
	require.Less(t, time.Since(started), cfg.SendTimeout, "before any stalled send timed out")
	inFlight := hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_attempts WHERE result = 'in_flight'")
	require.Positive(t, inFlight, "the stalled sends still hang")
	require.LessOrEqual(t, inFlight, int64(2*cfg.Concurrency*3/4), "stalled endpoints hold at most three quarters of each replica's handlers")
	putBack := 0.0
	for _, h := range []*harness{a, b} {
		for _, reason := range []string{"endpoint_probing", "endpoint_slow"} {
			putBack += hosttest.Metric(t, h.registry, "keelson_webhooks_put_back_total", "reason", reason)
		}
	}
	require.Positive(t, putBack, "stalled endpoints' other deliveries were put back to wait")
	waiting := hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_deliveries WHERE event_type = 'stalled.tick' AND attempt_count = 0 AND status = 'pending'`)
	require.Positive(t, waiting, "put back without an attempt")
	t.Logf("%d stalled sends in flight, %.0f put back, %d stalled deliveries waiting without an attempt", inFlight, putBack, waiting)
}

func TestAReplicaThatNeverSentToAnEndpointWhoseLastAttemptSucceededSendsAtOnceWhileNewEndpointsHang(t *testing.T) {
	cfg := testConfig()
	cfg.SendTimeout, cfg.ClaimLease = time.Minute, 2*time.Minute
	cfg.Concurrency = 8 // two probe places: the hanging endpoints fill them for a minute
	h := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	stalled := hangingEndpoints(t, h, 10, "stalled.*")
	healthy := newReceiver(t, nil)
	id, _ := h.subscribe(healthy.URL, "healthy.*")
	// Another replica's last attempt to it succeeded; this one has not sent to it.
	_, err := h.db.SQL().Exec(`UPDATE webhook_subscription_health SET last_success_at = now() WHERE subscription_id = $1`, id)
	require.NoError(t, err)
	ctx := tenantContext()
	for range 4 {
		_, err := h.svc.PublishEvent(ctx, EventInput{Type: "stalled.tick", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	hosttest.Eventually(t, 20*time.Second, func() bool { return requestsReached(stalled) >= 2 }, "hanging probes hold the probe places")

	started := time.Now()
	for range 10 {
		_, err := h.svc.PublishEvent(ctx, EventInput{Type: "healthy.tick", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	hosttest.Eventually(t, 45*time.Second, func() bool { return healthy.count() == 10 }, "healthy deliveries sent")
	require.Less(t, time.Since(started), cfg.SendTimeout, "before any probe place freed")
	t.Logf("10 deliveries to the vouched endpoint in %s", time.Since(started))
}

// hangingEndpoints subscribes, through h, n endpoints that never answer within the send timeout; their
// requests are let go when the test ends.
func hangingEndpoints(t *testing.T, h *harness, n int, pattern string) []*receiver {
	release := make(chan struct{})
	rs := make([]*receiver, n)
	for i := range rs {
		rs[i] = newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		h.subscribe(rs[i].URL, pattern)
	}
	// Registered after the receivers, so it runs before their Close, which waits for the hanging requests.
	t.Cleanup(func() { close(release) })
	return rs
}

// requestsReached counts the requests that reached rs.
func requestsReached(rs []*receiver) int {
	n := 0
	for _, r := range rs {
		n += r.count()
	}
	return n
}
