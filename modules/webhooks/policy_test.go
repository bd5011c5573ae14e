package webhooks

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestRetryAfterOn429And503SetsTheNextAttemptCappedAnd410DisablesAtOnce(t *testing.T) {
	cfg := testConfig()
	cfg.RetryAfterMax = 3 * time.Second
	h := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	answer := func(status int, retryAfter func() string) *receiver {
		return newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				if retryAfter != nil {
					w.Header().Set("Retry-After", retryAfter())
				}
				w.WriteHeader(status)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
	}
	seconds := answer(http.StatusServiceUnavailable, func() string { return "1" })
	date := answer(http.StatusTooManyRequests, func() string { return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat) })
	capped := answer(http.StatusTooManyRequests, func() string { return "3600" })
	gone := answer(http.StatusGone, nil)
	h.subscribe(seconds.URL, "policy.seconds")
	h.subscribe(date.URL, "policy.date")
	h.subscribe(capped.URL, "policy.capped")
	goneID, _ := h.subscribe(gone.URL, "policy.gone")

	ids := map[string]string{}
	for _, typ := range []string{"policy.seconds", "policy.date", "policy.capped", "policy.gone"} {
		ids[typ] = h.publish(typ, map[string]any{})
	}
	// The gap from the end of the first attempt to the start of the retry:
	// never shorter than the delay asked for, and not much longer. Measured
	// after the fact, so a slow machine cannot make the test miss the window.
	retryGap := func(typ string) time.Duration {
		var d Delivery
		var as []Attempt
		hosttest.Eventually(t, 20*time.Second, func() bool { d, as = deliveryOf(t, h, ids[typ]); return d.Status == StatusSucceeded }, "%s retried", typ)
		require.Len(t, as, 2, typ)
		return as[1].StartedAt.Sub(as[0].StartedAt.Add(time.Duration(as[0].DurationMS) * time.Millisecond))
	}
	between := func(want, got time.Duration, msg string) {
		t.Helper()
		require.GreaterOrEqual(t, got, want-50*time.Millisecond, msg)
		require.Less(t, got, want+2*time.Second, msg)
	}
	between(time.Second, retryGap("policy.seconds"), "Retry-After: 1")
	gap := retryGap("policy.date")
	require.GreaterOrEqual(t, gap, 900*time.Millisecond, "Retry-After: an HTTP date ~2 s ahead (whole seconds)")
	require.Less(t, gap, 4*time.Second, "Retry-After: an HTTP date ~2 s ahead")
	between(cfg.RetryAfterMax, retryGap("policy.capped"), "Retry-After: 3600 capped")
	require.Equal(t, 2, seconds.count())

	hosttest.Eventually(t, 20*time.Second, func() bool { return h.statusOf(goneID)["status"] == "disabled" }, "410 disables")
	require.Equal(t, "gone", h.statusOf(goneID)["disabled_reason"])
	hosttest.Eventually(t, 20*time.Second, func() bool { return len(h.disabledEvents()) == 1 }, "disabled event")
	require.Equal(t, ReasonGone, h.disabledEvents()[0].Reason)
	d, _ := deliveryOf(t, h, ids["policy.gone"])
	require.Equal(t, StatusPending, d.Status, "its delivery waits")
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 1, gone.count(), "nothing more is sent")
}

func TestTheAttemptLogKeepsHeadersAUTF8SafeExcerptAndTheReplicaLogsFailuresAndStatsSumItUp(t *testing.T) {
	var logs hosttest.LogBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true, logger: logger})
	// 4095 ASCII bytes then a two-byte character across the 4 KiB limit, then more.
	long := strings.Repeat("a", 4095) + "é" + strings.Repeat("b", 100)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("X-Request-Id", "req-42")
			w.Header().Set("X-Other", "not kept")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(long))
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	subID, _ := h.subscribe(rc.URL, "*")
	eventID := h.publish("log.check", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { d, _ := deliveryOf(t, h, eventID); return d.Status == StatusSucceeded }, "delivered")
	d, attempts := deliveryOf(t, h, eventID)
	require.Len(t, attempts, 2)
	first := attempts[0]
	require.Equal(t, ResultFailed, first.Result)
	require.Equal(t, "req-42", first.ResponseHeaders["X-Request-Id"])
	require.NotContains(t, first.ResponseHeaders, "X-Other")
	require.Equal(t, strings.Repeat("a", 4095), first.ResponseExcerpt, "cut at 4 KiB, the split character dropped")
	require.True(t, utf8.ValidString(first.ResponseExcerpt))
	require.Equal(t, h.svc.instance, first.Instance)
	require.Equal(t, ResultSucceeded, attempts[1].Result)
	require.Empty(t, d.ClaimedBy, "a finished delivery holds no claim")

	body := h.call(http.MethodGet, "/deliveries/"+d.ID.String(), nil).json(t)
	got := body["attempts"].([]any)[0].(map[string]any)
	require.Equal(t, "failed", got["result"])
	require.Equal(t, h.svc.instance, got["instance"])
	require.Equal(t, "req-42", got["response_headers"].(map[string]any)["X-Request-Id"])

	out := logs.String()
	require.Contains(t, out, "webhook attempt failed")
	require.Contains(t, out, "delivery_id="+d.ID.String())
	require.Contains(t, out, "subscription_id="+subID)
	require.Contains(t, out, "attempt=1")
	require.Contains(t, out, "error_class=http_status")

	stats := h.call(http.MethodGet, "/subscriptions/"+subID+"/stats", nil)
	require.Equal(t, http.StatusOK, stats.status, string(stats.body))
	st := stats.json(t)
	require.Equal(t, 0.0, st["due_backlog"])
	require.Equal(t, 0.0, st["in_flight"])
	for _, w := range st["windows"].([]any) {
		w := w.(map[string]any)
		require.Equal(t, 2.0, w["attempts"], w["window"])
		require.Equal(t, 1.0, w["succeeded"])
		require.Equal(t, 0.5, w["success_rate"])
		require.NotNil(t, w["p50_duration_ms"])
		require.NotNil(t, w["p95_duration_ms"])
	}

	// A paused subscription's delivery shows who claimed it and counts in the due backlog.
	_, err := h.svc.PauseSubscription(tenantContext(), d.SubscriptionID, concurrency.Precondition{})
	require.NoError(t, err)
	waiting := h.publish("log.check", map[string]any{})
	w, _ := deliveryOf(t, h, waiting)
	require.Equal(t, h.svc.instance, w.ClaimedBy)
	require.NoError(t, h.db.Gorm().Exec("UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = ?", w.ID).Error)
	st = h.call(http.MethodGet, "/subscriptions/"+subID+"/stats", nil).json(t)
	require.Equal(t, 1.0, st["due_backlog"])
	require.Equal(t, "paused", st["status"])
}
