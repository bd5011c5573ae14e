package webhooks

import (
	"context"
	"maps"
	"slices"
	"sync"
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
		tk, ok, err := h.svc.store.takeClaim(ctx, takeRequest{DeliveryID: born.ID, Claim: *born.ClaimID, AttemptID: uuid.Must(uuid.NewV7())},
			takeTerms{Now: now, LeaseUntil: now.Add(time.Minute), Instance: "test", AbandonedBefore: now.Add(-time.Minute)})
		require.NoError(t, err)
		require.True(t, ok)
		out = append(out, tk)
	}
	return out
}

func succeededOutcome(h *harness, t taken) outcome {
	now := h.svc.now()
	t.attempt.Result = ResultSucceeded
	code := 200
	t.attempt.StatusCode = &code
	t.delivery.MarkSucceeded(now, code)
	return outcome{delivery: t.delivery, attempt: t.attempt}
}

func TestABatchedOutcomeRacingARedeliveryLeavesTheRedeliveryInPlaceAndMarksItsAttemptSuperseded(t *testing.T) {
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

func TestTheOutcomeClosesEachAttemptAsAHOTUpdateAndKeepsTheStartTheTakeRecorded(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "*")
	ctx := tenantContext()
	sent := takeFresh(t, h, 20)
	batch := make([]outcome, len(sent))
	for i, tk := range sent {
		batch[i] = succeededOutcome(h, tk)
	}

	var updated, hot int
	require.NoError(t, h.db.WithTx(ctx, func(ctx context.Context) error {
		if _, err := h.svc.store.recordOutcomes(ctx, batch, h.svc.now()); err != nil {
			return err
		}
		// This transaction's own counts: no other session's writes mix in.
		return h.db.Conn(ctx).Raw(`SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables
			WHERE relname = 'webhook_attempts'`).Row().Scan(&updated, &hot)
	}))
	require.Equal(t, len(sent), updated)
	require.Equal(t, updated, hot, "an outcome changes no indexed column of its attempt, and the page has room for it")

	for _, tk := range sent {
		var a Attempt
		require.NoError(t, h.db.Conn(ctx).Where("id = ?", tk.attempt.ID).Take(&a).Error)
		require.Equal(t, ResultSucceeded, a.Result)
		require.True(t, a.StartedAt.Equal(tk.attempt.StartedAt), "started_at %s, the take recorded %s", a.StartedAt, tk.attempt.StartedAt)
	}
}

func TestABatchOfTakesThatKeepTheirLeasesWritesEveryDeliveryAsAHOTUpdate(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "*")
	ctx := tenantContext()
	reqs := bornRequests(t, h, 40) // more rows than one page holds: every row of a full page is taken at once

	var updated, hot int
	require.NoError(t, h.db.WithTx(ctx, func(ctx context.Context) error {
		res, err := h.svc.writeTakes(ctx, reqs)
		if err != nil {
			return err
		}
		for i, r := range res {
			require.True(t, r.ok, "request %d", i)
		}
		// This transaction's own counts: no other session's writes mix in.
		return h.db.Conn(ctx).Raw(`SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables
			WHERE relname = 'webhook_deliveries'`).Row().Scan(&updated, &hot)
	}))
	require.Equal(t, len(reqs), updated)
	require.Equal(t, updated, hot, "a take within its lease changes no indexed column, and each page has room for a new version of all its rows")
}

func TestAnAttemptTakenAheadOfItsRateSlotStartsAtTheSlot(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "*")
	ctx := tenantContext()
	req := bornRequests(t, h, 1)[0]
	now := h.svc.now()
	slot := now.Add(1500 * time.Millisecond)
	req.SlotAt = &slot
	tk, ok, err := h.svc.store.takeClaim(ctx, req,
		takeTerms{Now: now, LeaseUntil: now.Add(time.Minute), Instance: "test", AbandonedBefore: now.Add(-time.Minute)})
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, tk.attempt.StartedAt.Equal(slot), "started %s, slot %s", tk.attempt.StartedAt, slot)
	var a Attempt
	require.NoError(t, h.db.Conn(ctx).Where("id = ?", tk.attempt.ID).Take(&a).Error)
	require.True(t, a.StartedAt.Equal(slot), "stored %s, slot %s", a.StartedAt, slot)
}

func TestOutcomesOfOneSubscriptionInOneBatchUpdateItsHealthAsIfWrittenInTurn(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	id, _ := h.subscribe(rc.URL, "*")
	ctx := tenantContext()
	sent := takeFresh(t, h, 4)
	failed := func(tk taken) outcome {
		now := h.svc.now()
		tk.attempt.Result, tk.attempt.ErrorClass = ResultFailed, errClassHTTPStatus
		tk.delivery.MarkFailedRetryingAfter(now, 500, "http_status: 500", h.svc.cfg.RetrySchedule, h.svc.jitter, 0)
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

// bornRequests publishes n events to the harness's subscriptions and returns the take requests of
// their born claims, each with a fresh attempt id.
func bornRequests(t *testing.T, h *harness, n int) []takeRequest {
	t.Helper()
	ctx := tenantContext()
	var reqs []takeRequest
	for range n {
		res, err := h.svc.PublishEvent(ctx, EventInput{Type: "batch.take", Data: []byte(`{"n":1}`)})
		require.NoError(t, err)
		var born Delivery
		require.NoError(t, h.db.Conn(ctx).Where("event_id = ?", res.ID).Take(&born).Error)
		reqs = append(reqs, takeRequest{DeliveryID: born.ID, Claim: *born.ClaimID, Tenant: born.TenantID, AttemptID: uuid.Must(uuid.NewV7())})
	}
	return reqs
}

func withFreshAttempts(reqs []takeRequest) []takeRequest {
	out := make([]takeRequest, len(reqs))
	for i, r := range reqs {
		r.AttemptID = uuid.Must(uuid.NewV7())
		out[i] = r
	}
	return out
}

func TestTwoReplicasTakingTheSameBatchOfClaimsAtOnceTakeEachDeliveryOnce(t *testing.T) {
	a := newHarness(t, testConfig(), harnessOptions{})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database})
	rc := newReceiver(t, nil)
	a.subscribe(rc.URL, "*")
	a.subscribe(rc.URL, "batch.*")
	for round := range 10 {
		reqs := bornRequests(t, a, 20) // 40 deliveries over two subscriptions
		reversed := withFreshAttempts(reqs)
		slices.Reverse(reversed) // the other replica's batch in the opposite order
		var ra, rb []takeResult
		var ea, eb error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); ra, ea = a.svc.writeTakes(context.Background(), withFreshAttempts(reqs)) }()
		go func() { defer wg.Done(); rb, eb = b.svc.writeTakes(context.Background(), reversed) }()
		wg.Wait()
		require.NoError(t, ea, "round %d", round)
		require.NoError(t, eb, "round %d", round)
		takenBy := map[uuid.UUID]int{}
		for _, r := range append(ra, rb...) {
			if r.ok {
				takenBy[r.delivery.ID]++
				require.Equal(t, 1, r.delivery.AttemptCount)
				require.Equal(t, ResultInFlight, r.attempt.Result)
			}
		}
		require.Len(t, takenBy, len(reqs), "round %d: every delivery taken", round)
		for id, n := range takenBy {
			require.Equal(t, 1, n, "round %d: delivery %s taken once", round, id)
		}
		var attempts int64
		require.NoError(t, a.db.Conn(tenantContext()).Model(&Attempt{}).Where("delivery_id IN ?", slices.Collect(maps.Keys(takenBy))).Count(&attempts).Error)
		require.Equal(t, int64(len(reqs)), attempts, "round %d: one attempt row per taken claim", round)
	}
}

func TestAStaleClaimInABatchIsSkippedWhileTheOtherClaimsAreTaken(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "*")
	reqs := bornRequests(t, h, 4)
	stale := reqs[1]
	stale.Claim = uuid.New()
	batch := []takeRequest{reqs[0], stale, reqs[2], reqs[3]}
	res, err := h.svc.writeTakes(context.Background(), batch)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true, true}, []bool{res[0].ok, res[1].ok, res[2].ok, res[3].ok})
	for _, i := range []int{0, 2, 3} {
		require.Equal(t, reqs[i].DeliveryID, res[i].delivery.ID)
		require.Equal(t, reqs[i].Claim, *res[i].delivery.SentClaimID)
		require.Equal(t, reqs[i].AttemptID, res[i].attempt.ID)
		require.Equal(t, rc.URL, res[i].sub.URL)
		require.NotEmpty(t, res[i].event.Data)
	}
	d, attempts, err := h.svc.Delivery(tenantContext(), reqs[1].DeliveryID)
	require.NoError(t, err)
	require.Nil(t, d.SentClaimID, "the stale pair's delivery was not taken")
	require.Empty(t, attempts)

	// The same batch again: everything was taken already, nothing is taken twice.
	res, err = h.svc.writeTakes(context.Background(), withFreshAttempts(batch))
	require.NoError(t, err)
	for i, r := range res {
		require.False(t, r.ok, "request %d", i)
	}
}

func TestCopiesOfOneClaimInOneBatchAreTakenOnce(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "*")
	req := bornRequests(t, h, 1)[0]
	var wg sync.WaitGroup
	results := make([]takeResult, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req
			r.AttemptID = uuid.Must(uuid.NewV7())
			var err error
			results[i], err = h.svc.takes.Do(context.Background(), r)
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	n := 0
	for _, r := range results {
		if r.ok {
			n++
		}
	}
	require.Equal(t, 1, n)
}

func TestASuccessOnAnEndpointWhoseHealthIsFreshNeitherWritesNorWaitsForItsHealthRow(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	sub, _ := h.subscribe(rc.URL, "*")
	ctx := tenantContext()
	sent := takeFresh(t, h, 2)
	now := h.svc.now()
	_, err := h.svc.store.recordOutcomes(ctx, []outcome{succeededOutcome(h, sent[0])}, now)
	require.NoError(t, err)
	version := func() (xmin string) {
		require.NoError(t, h.db.SQL().QueryRowContext(ctx, `SELECT xmin::text FROM webhook_subscription_health
			WHERE subscription_id = $1`, sub).Scan(&xmin))
		return xmin
	}
	refreshed := version()

	// Another replica's outcome batch holds the row, as it does while it records a failure.
	other, err := h.db.SQL().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = other.Rollback() }()
	_, err = other.ExecContext(ctx, `SELECT 1 FROM webhook_subscription_health WHERE subscription_id = $1 FOR UPDATE`, sub)
	require.NoError(t, err)

	waitless, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	results, err := h.svc.store.recordOutcomes(waitless, []outcome{succeededOutcome(h, sent[1])}, now.Add(500*time.Millisecond))
	require.NoError(t, err, "a success within the second of the last refresh waited for the health row's lock")
	require.True(t, results[0].won)
	require.Zero(t, results[0].health.ConsecutiveFailures)
	require.Equal(t, refreshed, version(), "the health row was not written")
}
