package webhooks

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// statusOf reads a subscription through the API.
func (h *harness) statusOf(id string) map[string]any {
	h.t.Helper()
	r := h.call(http.MethodGet, "/subscriptions/"+id, nil)
	require.Equal(h.t, http.StatusOK, r.status, string(r.body))
	return r.json(h.t)
}

func countAttempts(t *testing.T, h *harness) int64 {
	return hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_attempts")
}

func TestAPauseRacingSweepsAndConsumersOnTwoReplicasStopsEverySendAndResumeLosesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.RetrySchedule = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond,
		50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond} // no delivery runs out of attempts
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	b := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true})
	var failing atomic.Bool
	failing.Store(true)
	// A slow receiver keeps sends in flight when the pause lands; failures keep retries due for the sweep.
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(5 * time.Millisecond)
		if failing.Load() && n%3 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	subID, _ := a.subscribe(rc.URL, "*")
	ctx := tenantContext()

	const events = 120
	var published sync.WaitGroup
	published.Add(1)
	go func() {
		defer published.Done()
		for i := range events {
			h := a
			if i%2 == 1 {
				h = b
			}
			_, err := h.svc.PublishEvent(ctx, EventInput{Type: "pause.race", Data: []byte(`{}`)})
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	hosttest.Eventually(t, 20*time.Second, func() bool { return rc.count() >= 20 }, "sending under way")
	r := b.call(http.MethodPost, "/subscriptions/"+subID+"/pause", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "paused", r.json(t)["status"])
	takenBeforePause := countAttempts(t, a)
	published.Wait()

	// Sweeps run every 50 ms on both replicas and new events keep their requests coming: none is taken.
	time.Sleep(time.Second)
	require.Equal(t, takenBeforePause, countAttempts(t, a), "no take after the pause committed")
	hosttest.Eventually(t, 30*time.Second, func() bool {
		return hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_attempts WHERE result = 'in_flight'") == 0
	}, "sends in flight at the pause finished")
	require.Equal(t, int(takenBeforePause), rc.count(), "every request received was taken before the pause")
	pending := hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'")
	require.Positive(t, pending, "deliveries wait while paused")
	require.Equal(t, int64(events), hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries"), "new events still got deliveries")

	failing.Store(false)
	r = a.call(http.MethodPost, "/subscriptions/"+subID+"/resume", nil, "If-Match", r.header.Get("ETag"))
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "active", r.json(t)["status"])
	hosttest.Eventually(t, 30*time.Second, func() bool {
		return hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'") == events
	}, "every delivery sent after resume")
	ids := map[string]bool{}
	for _, req := range rc.received() {
		ids[req.header.Get("webhook-id")] = true
	}
	require.Len(t, ids, events, "every event reached the receiver")
	require.Equal(t, int64(rc.count()), countAttempts(t, a), "one attempt row per request received")
	require.Zero(t, hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries WHERE status = 'failed'"))
}

func TestAutoDisableRacingRedeliveriesDisablesOnceThenWaitsAndResumeSendsEverything(t *testing.T) {
	cfg := testConfig()
	cfg.RetrySchedule = make([]time.Duration, 100) // no delivery runs out of attempts before the disable, however slow the machine
	for i := range cfg.RetrySchedule {
		cfg.RetrySchedule[i] = 30 * time.Millisecond
	}
	cfg.DisableAfter, cfg.DisableMinAttempts = 300*time.Millisecond, 5
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	b := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true})
	var healthy atomic.Bool
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	})
	subID, _ := a.subscribe(rc.URL, "*")
	ctx := tenantContext()
	const events = 6
	for range events {
		a.publish("disable.race", map[string]any{})
	}
	var ids []uuid.UUID
	require.NoError(t, a.db.Gorm().Raw("SELECT id FROM webhook_deliveries").Scan(&ids).Error)

	// Redeliveries from the other replica race the failing outcomes until the subscription is disabled.
	stop := make(chan struct{})
	var redelivered atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := b.svc.Redeliver(ctx, ids[i%len(ids)], concurrency.Precondition{}); err == nil {
				redelivered.Add(1)
			}
		}
	}()
	hosttest.Eventually(t, 30*time.Second, func() bool { return a.statusOf(subID)["status"] == "disabled" }, "auto-disabled")
	hosttest.Eventually(t, 30*time.Second, func() bool { return redelivered.Load() >= 3 }, "redeliveries made")
	close(stop)
	wg.Wait()
	got := a.statusOf(subID)
	require.Equal(t, "failing", got["disabled_reason"])
	require.GreaterOrEqual(t, got["consecutive_failures"].(float64), 5.0)
	require.NotNil(t, got["last_failure_at"])
	require.Nil(t, got["last_success_at"])
	require.Positive(t, redelivered.Load())

	hosttest.Eventually(t, 30*time.Second, func() bool {
		return hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_attempts WHERE result = 'in_flight'") == 0
	}, "sends in flight finished")
	sent := rc.count()
	time.Sleep(500 * time.Millisecond) // sweeps every 50 ms and the redeliveries' requests find it disabled
	require.Equal(t, sent, rc.count(), "nothing sent while disabled")
	require.Equal(t, int64(sent), countAttempts(t, a), "one attempt row per request sent, superseded ones included")
	require.Equal(t, int64(events), hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'"), "they wait")
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(a.disabledEvents())+len(b.disabledEvents()) >= 1 }, "disabled event")
	time.Sleep(200 * time.Millisecond)
	disabled := append(a.disabledEvents(), b.disabledEvents()...)
	require.Len(t, disabled, 1, "disabled once")
	require.Equal(t, subID, disabled[0].SubscriptionID.String())
	require.Equal(t, ReasonFailing, disabled[0].Reason)
	r := a.call(http.MethodPost, "/events", map[string]any{"type": "disable.race", "data": map[string]any{}})
	require.Equal(t, 0.0, r.json(t)["deliveries"], "a disabled subscription gets no new deliveries")

	healthy.Store(true)
	r = b.call(http.MethodPost, "/subscriptions/"+subID+"/resume", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, 0.0, r.json(t)["consecutive_failures"])
	hosttest.Eventually(t, 30*time.Second, func() bool {
		return hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'") == events
	}, "all sent after resume")
	require.NotNil(t, a.statusOf(subID)["last_success_at"])
}

func TestPauseResumeAndStatusHonourIfMatchAndBadStatusOrRateGets422(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	id, _ := h.subscribe("https://example.com/h", "*")
	created := h.statusOf(id)
	require.Equal(t, "active", created["status"])
	require.Nil(t, created["disabled_reason"])
	require.Equal(t, 0.0, created["consecutive_failures"])

	r := h.call(http.MethodPost, "/subscriptions/"+id+"/pause", nil, "If-Match", `"1"`)
	require.Equal(t, http.StatusPreconditionFailed, r.status)
	r = h.call(http.MethodPost, "/subscriptions/"+id+"/pause", nil, "If-Match", `"`+created["version"].(string)+`"`)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "paused", r.json(t)["status"])
	require.Equal(t, false, r.json(t)["enabled"])

	r = h.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"status": "disabled"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "manual", r.json(t)["disabled_reason"])
	r = h.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"enabled": true})
	require.Equal(t, "active", r.json(t)["status"])
	require.Nil(t, r.json(t)["disabled_reason"])

	before := h.statusOf(id)
	for _, body := range []map[string]any{{"status": "sleeping"}, {"status": "paused", "enabled": true}, {"status": ""}} {
		r = h.call(http.MethodPatch, "/subscriptions/"+id, body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
	}
	for _, body := range []map[string]any{{"status": "off"}, {"rate_limit": -1}, {"rate_limit": 0.01}, {"rate_limit": 20000}, {"rate_limit": "ten"}} {
		body["url"], body["event_types"] = "https://example.com/x", []string{"*"}
		r = h.call(http.MethodPost, "/subscriptions", body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
		require.Equal(t, "application/problem+json", strings.Split(r.header.Get("Content-Type"), ";")[0])
	}
	for _, rate := range []any{-5, 1e9, "x"} {
		r = h.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"rate_limit": rate})
		require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
	}
	require.Equal(t, before, h.statusOf(id))
	require.Equal(t, int64(1), hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_subscriptions"))
	r = h.call(http.MethodPost, "/subscriptions/"+uuid.NewString()+"/resume", nil)
	require.Equal(t, http.StatusNotFound, r.status)
}
