package webhooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// postEvent posts an event through replica h's API, off the test goroutine, and returns its id.
func postEvent(h *harness, eventType string, i int) (string, error) {
	raw, _ := json.Marshal(map[string]any{"type": eventType, "data": map[string]any{"i": i}})
	req, err := http.NewRequest(http.MethodPost, h.api.URL+"/api/v1/webhooks/events", bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+hosttest.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("POST /events: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", fmt.Errorf("POST /events: %w", err)
	}
	return body.ID, nil
}

// firstArrivals remembers when each webhook-id first reached an endpoint.
type firstArrivals struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (f *firstArrivals) respond(_ int, w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if _, ok := f.at[r.Header.Get(signing.HeaderID)]; !ok {
		f.at[r.Header.Get(signing.HeaderID)] = time.Now()
	}
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *firstArrivals) of(id string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.at[id]
	return t, ok
}

func TestAHealthyEndpointBesideFiftyHangingOnesOnTwoReplicasGetsItsEventsWithinThreeSecondsAtP95(t *testing.T) {
	cfg := testConfig()
	cfg.SendTimeout, cfg.ClaimLease, cfg.SweepInterval, cfg.HoldFor = 10*time.Second, 30*time.Second, time.Second, 30*time.Second
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	b := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true})
	arrivals := &firstArrivals{at: map[string]time.Time{}}
	healthy := newReceiver(t, arrivals.respond)
	a.subscribe(healthy.URL, "fair.*", "warm.*")
	for i := range 4 { // both replicas have sent to it before
		_, err := postEvent([]*harness{a, b}[i%2], "warm.up", i)
		require.NoError(t, err)
	}
	hosttest.Eventually(t, 20*time.Second, func() bool { return healthy.count() == 4 }, "healthy endpoint known")
	dead := hangingEndpoints(t, a, 50, "fair.*")

	// 10 events/s for 10 s, open loop, alternating the replicas; each fans out to all 51 endpoints.
	const events, rate = 100, 10
	sent, ids := make([]time.Time, events), make([]string, events)
	errs := make(chan error, events)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range events {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / rate)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent[i] = time.Now()
			id, err := postEvent([]*harness{a, b}[i%2], "fair.tick", i)
			ids[i] = id
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	hosttest.Eventually(t, 2*time.Minute, func() bool { return healthy.count() == 4+events }, "every healthy delivery arrived")

	lat := make([]time.Duration, events)
	for i, id := range ids {
		at, ok := arrivals.of(id)
		require.True(t, ok, "event %s reached the healthy endpoint", id)
		lat[i] = at.Sub(sent[i])
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p95 := lat[events/2], lat[events*95/100]
	t.Logf("healthy endpoint beside 50 hanging ones: p50 %s, p95 %s, max %s; %d requests reached the hanging endpoints",
		p50, p95, lat[events-1], requestsReached(dead))
	// The goal is 500 ms; 3 s catches a regression (tens of seconds) without failing on a loaded machine,
	// and the race detector, which slows every goroutine several times, gets four times that.
	bound := 3 * time.Second
	if raceEnabled {
		bound = 12 * time.Second
	}
	require.Less(t, p95, bound, "healthy p95")
	require.Less(t, requestsReached(dead), events*50/4, "the hanging endpoints were held, not sent every delivery")
}

func TestAfterHangingEndpointsComeBackEveryDeliveryIsDeliveredExactlyOnce(t *testing.T) {
	cfg := testConfig()
	cfg.SendTimeout, cfg.ClaimLease, cfg.SweepInterval = 2*time.Second, 10*time.Second, 200*time.Millisecond
	cfg.HangAfter, cfg.HoldFor = 300*time.Millisecond, time.Second
	cfg.RetrySchedule = []time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second, time.Second,
		time.Second, time.Second, time.Second, time.Second}
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	b := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true})

	// Ten endpoints hang until they come back; then they answer every request at once. Only a
	// request answered 2xx was delivered: one that timed out was not, whatever the endpoint did.
	back := make(chan struct{})
	var mu sync.Mutex
	delivered := map[string]int{} // endpoint index + webhook-id → 2xx answers
	endpoints := make([]*receiver, 10)
	for e := range endpoints {
		endpoints[e] = newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			select {
			case <-back:
			case <-r.Context().Done():
				return
			}
			mu.Lock()
			delivered[fmt.Sprintf("%d/%s", e, r.Header.Get(signing.HeaderID))]++
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
		a.subscribe(endpoints[e].URL, "order.*")
	}
	t.Cleanup(func() {
		select {
		case <-back:
		default:
			close(back)
		}
	})
	const events = 20
	ids := make([]string, events)
	for i := range events {
		id, err := postEvent([]*harness{a, b}[i%2], "order.created", i)
		require.NoError(t, err)
		ids[i] = id
	}
	hosttest.Eventually(t, 30*time.Second, func() bool {
		return hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_subscription_health WHERE held_until IS NOT NULL") == int64(len(endpoints))
	}, "every hanging endpoint held")
	time.Sleep(2 * cfg.SendTimeout) // hung sends time out, probes find the endpoints still hanging
	close(back)

	hosttest.Eventually(t, 2*time.Minute, func() bool {
		return hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'") == int64(events*len(endpoints))
	}, "every delivery succeeded")
	mu.Lock()
	defer mu.Unlock()
	for e := range endpoints {
		for _, id := range ids {
			key := fmt.Sprintf("%d/%s", e, id)
			if n := delivered[key]; n != 1 {
				// A second delivery is allowed only after a lease expiry: an attempt closed as unknown.
				unknown := hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
					WHERE d.event_id = $1 AND a.result = 'unknown'`, id)
				require.True(t, n > 1 && unknown > 0, "%s delivered %d times", key, n)
			}
		}
	}
	require.Zero(t, hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_subscription_health WHERE held_until IS NOT NULL"),
		"no endpoint held once they all answered")
}

func TestAnEndpointThatAnswersInEightSecondsIsStillServedBesideHangingOnes(t *testing.T) {
	cfg := testConfig()
	cfg.SendTimeout, cfg.ClaimLease, cfg.SweepInterval, cfg.HoldFor = 10*time.Second, 30*time.Second, 200*time.Millisecond, 30*time.Second
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	b := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true})
	hangingEndpoints(t, a, 10, "report.*")
	slow := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(8 * time.Second):
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
		}
	})
	a.subscribe(slow.URL, "report.*")
	const events = 3
	for i := range events {
		_, err := postEvent([]*harness{a, b}[i%2], "report.ready", i)
		require.NoError(t, err)
	}
	started := time.Now()
	hosttest.Eventually(t, 2*time.Minute, func() bool {
		return hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
			WHERE s.url = $1 AND d.status = 'succeeded'`, slow.URL) == events
	}, "the slow endpoint's deliveries succeeded")
	require.Zero(t, hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_attempts a JOIN webhook_subscriptions s ON s.id = a.subscription_id
		WHERE s.url = $1 AND a.result <> 'succeeded'`, slow.URL), "no attempt of it failed: held, never timed out")
	held := hosttest.Metric(t, a.registry, "keelson_webhooks_endpoints_held_total") + hosttest.Metric(t, b.registry, "keelson_webhooks_endpoints_held_total")
	t.Logf("%d deliveries of 8 s each in %s; endpoints held %.0f times", events, time.Since(started), held)
}
