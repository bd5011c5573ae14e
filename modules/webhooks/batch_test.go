package webhooks

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/concurrency"
)

// takeFresh publishes n events to one subscription and takes each delivery's born claim.
func takeFresh(t *testing.T, h *harness, n int) []taken {
	t.Helper()
	ctx := tenantContext()
	var out []taken
	for range n {
		res, err := h.svc.PublishEvent(ctx, EventInput{Type: "batch.round", Data: []byte(`{"n":1}`)})
		require.NoError(t, err)
		require.Equal(t, 1, res.Deliveries)
		var born Delivery
		require.NoError(t, h.db.Conn(ctx).Where("event_id = ?", res.ID).Take(&born).Error)
		now := h.svc.now()
		tk, ok, err := h.svc.store.takeClaim(ctx, takeRequest{DeliveryID: born.ID, Claim: *born.ClaimID, AttemptID: uuid.Must(uuid.NewV7()),
			Now: now, LeaseUntil: now.Add(time.Minute), Instance: "test", AbandonedBefore: now.Add(-time.Minute)})
		require.NoError(t, err)
		require.True(t, ok)
		out = append(out, tk)
	}
	return out
}

func succeededOutcome(h *harness, t taken) outcome {
	now := h.svc.now()
	t.attempt.Result, t.attempt.StartedAt = ResultSucceeded, now
	code := 200
	t.attempt.StatusCode = &code
	t.delivery.MarkSucceeded(now, code)
	return outcome{delivery: t.delivery, attempt: t.attempt}
}

func Test_a_batched_outcome_racing_a_redelivery_leaves_the_redelivery_in_place_and_marks_its_attempt_superseded(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "*")
	ctx := tenantContext()
	sent := takeFresh(t, h, 3)

	// The middle delivery is redelivered while the three sends run.
	redelivered, err := h.svc.Redeliver(ctx, sent[1].delivery.ID, concurrency.Precondition{})
	require.NoError(t, err)

	batch := []outcome{succeededOutcome(h, sent[0]), succeededOutcome(h, sent[1]), succeededOutcome(h, sent[2])}
	results, err := h.svc.writeOutcomes(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true}, []bool{results[0].won, results[1].won, results[2].won})

	for i, tk := range sent {
		d, attempts, err := h.svc.Delivery(ctx, tk.delivery.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1, "delivery %d: its attempt row stays", i)
		if i == 1 {
			require.Equal(t, StatusPending, d.Status, "the redelivery was not overwritten")
			require.Equal(t, *redelivered.ClaimID, *d.ClaimID)
			require.Equal(t, TriggerRedeliver, d.NextTrigger)
			require.Equal(t, ResultSuperseded, attempts[0].Result)
			require.Equal(t, 200, *attempts[0].StatusCode, "the superseded attempt keeps what it observed")
			continue
		}
		require.Equal(t, StatusSucceeded, d.Status, "delivery %d", i)
		require.Equal(t, ResultSucceeded, attempts[0].Result, "delivery %d", i)
	}
}

func Test_outcomes_of_one_subscription_in_one_batch_update_its_health_as_if_written_in_turn(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	id, _ := h.subscribe(rc.URL, "*")
	ctx := tenantContext()
	sent := takeFresh(t, h, 4)
	failed := func(tk taken) outcome {
		now := h.svc.now()
		tk.attempt.Result, tk.attempt.StartedAt, tk.attempt.ErrorClass = ResultFailed, now, errClassHTTPStatus
		tk.delivery.MarkFailed(now, 500, "http_status: 500", h.svc.cfg.RetrySchedule, h.svc.jitter)
		return outcome{delivery: tk.delivery, attempt: tk.attempt}
	}
	// failure, success, failure, failure: the run is the last two.
	batch := []outcome{failed(sent[0]), succeededOutcome(h, sent[1]), failed(sent[2]), failed(sent[3])}
	results, err := h.svc.writeOutcomes(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, 2, results[3].health.ConsecutiveFailures)
	require.Equal(t, batch[2].attempt.StartedAt, results[3].health.FailingSince.UTC(), "the run started with the first failure after the success")
	health, err := h.svc.store.health(ctx, uuid.MustParse(id))
	require.NoError(t, err)
	require.Equal(t, 2, health.ConsecutiveFailures)
	require.NotNil(t, health.LastSuccessAt)
	require.NotNil(t, health.LastFailureAt)
}
