package webhooks

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/jobs"
)

// failedDeliveries publishes n events to the harness's subscriptions and marks their deliveries as
// failed (their retries exhausted), the state a recovery starts from.
func (h *harness) failedDeliveries(n int) []uuid.UUID {
	h.t.Helper()
	ids := make([]uuid.UUID, 0, n)
	for range n {
		res, err := h.svc.PublishEvent(tenantContext(), EventInput{Type: "order.failed", Data: []byte(`{"n":1}`)})
		require.NoError(h.t, err)
		var id string
		require.NoError(h.t, h.db.SQL().QueryRow(`UPDATE webhook_deliveries SET status = 'failed', claim_id = NULL,
			next_attempt_at = NULL, attempt_count = 3, round_failures = 3, last_error = 'HTTP 500'
			WHERE event_id = $1 RETURNING id`, res.ID).Scan(&id))
		ids = append(ids, uuid.MustParse(id))
	}
	return ids
}

// runRecoveryJob runs the operation's job the way a worker would.
func (h *harness) runRecoveryJob(opID uuid.UUID) error {
	payload, err := json.Marshal(recoverPayload{OperationID: opID})
	require.NoError(h.t, err)
	return h.svc.runRecovery(tenantContext(), jobs.Job{ID: uuid.New(), Kind: recoverJob, Payload: payload, Attempt: 1, MaxAttempts: 5})
}

func TestRecoveryAnswers202WithAnOperationWhoseStatusCountsAndProgressAreReadable(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	subID, _ := h.subscribe(rc.URL, "*")
	before := time.Now().Add(-time.Minute)
	failed := h.failedDeliveries(5)

	r := h.call(http.MethodPost, "/subscriptions/"+subID+"/recover", map[string]any{})
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
	r = h.call(http.MethodPost, "/subscriptions/"+subID+"/recover", map[string]any{"since": before, "until": before.Add(-time.Second)})
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
	r = h.call(http.MethodPost, "/subscriptions/"+uuid.NewString()+"/recover", map[string]any{"since": before})
	require.Equal(t, http.StatusNotFound, r.status, string(r.body))

	r = h.call(http.MethodPost, "/subscriptions/"+subID+"/recover", map[string]any{"since": before.Format(time.RFC3339)})
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	op := r.json(t)
	assert.Equal(t, "queued", op["status"])
	assert.Equal(t, map[string]any{"matched": 5.0, "requeued": 0.0}, op["counts"])
	location := r.header.Get("Location")
	require.Equal(t, "/api/v1/webhooks/operations/"+op["id"].(string), location)
	assert.EqualValues(t, 1, hosttest.Count(t, h.db, `SELECT count(*) FROM jobs WHERE kind = ?`, recoverJob), "one job, enqueued with the operation")

	require.NoError(t, h.runRecoveryJob(uuid.MustParse(op["id"].(string))))
	r = h.call(http.MethodGet, "/operations/"+op["id"].(string), nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	done := r.json(t)
	assert.Equal(t, "succeeded", done["status"])
	assert.Equal(t, map[string]any{"matched": 5.0, "requeued": 5.0}, done["counts"])
	assert.Equal(t, 1.0, done["progress"])
	assert.NotNil(t, done["finished_at"])
	for _, id := range failed {
		d, err := h.svc.store.delivery(tenantContext(), id)
		require.NoError(t, err)
		assert.Equal(t, StatusPending, d.Status)
		assert.Equal(t, TriggerRedeliver, d.NextTrigger)
		assert.Len(t, h.deliveryRequestsOf(id), 2, "the fan-out's request and the recovery's")
	}
	r = h.call(http.MethodGet, "/operations/"+uuid.NewString(), nil)
	assert.Equal(t, http.StatusNotFound, r.status)
}

func TestRecoveryRacingRedeliveriesAndTheSweepOnTwoReplicasSendsOncePerClaim(t *testing.T) {
	cfg := testConfig()
	a := newHarness(t, cfg, harnessOptions{})
	b := newHarness(t, cfg, harnessOptions{database: a.database})
	rc := newReceiver(t, nil)
	subID, _ := a.subscribe(rc.URL, "*")
	ids := a.failedDeliveries(300)

	op, err := a.svc.Recover(tenantContext(), uuid.MustParse(subID), RecoverInput{Since: new(time.Now().Add(-time.Hour))})
	require.NoError(t, err)
	require.Equal(t, len(ids), op.Total)

	// Replica a recovers in batches of 200; replica b redelivers deliveries at random and sweeps, while
	// leases are made to expire under everyone so the sweep keeps re-claiming what the others claimed.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var redelivered, redeliverConflicts atomic.Int64
	wg.Add(3)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := b.svc.Redeliver(tenantContext(), ids[rand.IntN(len(ids))], concurrency.Precondition{})
			var conflict *concurrency.ConflictError
			switch {
			case err == nil:
				redelivered.Add(1)
			case errors.As(err, &conflict):
				redeliverConflicts.Add(1)
			default:
				t.Errorf("redeliver: %v", err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := b.db.SQL().Exec(`UPDATE webhook_deliveries SET next_attempt_at = now() - interval '1 second'
				WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = 'pending' ORDER BY random() LIMIT 20)`); err != nil {
				t.Errorf("expire leases: %v", err)
				return
			}
			if err := b.svc.Sweep(tenantContext()); err != nil {
				t.Errorf("sweep: %v", err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		defer close(stop)
		if err := a.runRecoveryJob(op.ID); err != nil {
			t.Errorf("recovery: %v", err)
		}
	}()
	wg.Wait()

	done, err := a.svc.Operation(tenantContext(), op.ID)
	require.NoError(t, err)
	require.Equal(t, OperationSucceeded, done.Status)
	assert.LessOrEqual(t, done.Requeued, len(ids), "no delivery requeued twice by the recovery")
	t.Logf("recovery requeued %d of %d; redeliveries %d won, %d lost", done.Requeued, len(ids), redelivered.Load(), redeliverConflicts.Load())
	assert.Zero(t, hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_deliveries WHERE status = 'failed'`), "every failed delivery is pending again")

	// Every claim was requested once; of each delivery's requests only the current claim's is sent.
	claims := map[uuid.UUID]int{}
	for _, r := range a.deliveryRequests() {
		claims[r.ClaimID]++
	}
	for claim, n := range claims {
		require.Equal(t, 1, n, "claim %s requested %d times", claim, n)
	}
	// With the sweep: the send gate puts back what a new endpoint cannot take yet, and the sweep sends it.
	consumer := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true})
	hosttest.Eventually(t, 3*time.Minute, func() bool {
		return hosttest.Metric(t, consumer.registry, "keelson_webhooks_delivery_outcomes_total", "outcome", "succeeded") == float64(len(ids))
	}, "every recovered delivery sent")
	seen := map[string]int{}
	for _, r := range rc.received() {
		seen[r.header.Get("webhook-id")]++
	}
	require.Len(t, seen, len(ids))
	for id, n := range seen {
		require.Equal(t, 1, n, "event %s sent %d times: once for its one current claim", id, n)
	}
}

func TestPruningRacingTheSweepAndRedeliveriesOnTwoReplicasNeverDeletesAPendingDelivery(t *testing.T) {
	cfg := testConfig()
	cfg.Retention = 24 * time.Hour
	cfg.RetentionBatch = 10
	a := newHarness(t, cfg, harnessOptions{})
	b := newHarness(t, cfg, harnessOptions{database: a.database})
	rc := newReceiver(t, nil)
	a.subscribe(rc.URL, "*")
	ctx := tenantContext()

	// 300 old deliveries: a third succeeded, a third failed (each with an attempt), a third pending and
	// due (retries or expired claims the sweep will take) — all created and last changed two days ago,
	// their time-ordered ids too.
	for range 300 {
		_, err := a.svc.PublishEvent(ctx, EventInput{Type: "order.old", Data: []byte(`{"n":1}`)})
		require.NoError(t, err)
	}
	_, err := a.db.SQL().Exec(`WITH numbered AS (SELECT id, row_number() OVER (ORDER BY id) % 3 AS k FROM webhook_deliveries)
		UPDATE webhook_deliveries d SET
			status = CASE numbered.k WHEN 0 THEN 'succeeded' WHEN 1 THEN 'failed' ELSE 'pending' END,
			claim_id = CASE WHEN numbered.k = 2 THEN d.claim_id END,
			next_attempt_at = CASE WHEN numbered.k = 2 THEN now() - interval '1 second' END,
			updated_at = now() - interval '2 days', created_at = now() - interval '2 days',
			id = (lpad(to_hex(CAST(extract(epoch FROM now() - interval '2 days') * 1000 AS bigint)), 12, '0')
				|| substr(replace(CAST(d.id AS text), '-', ''), 13))::uuid
		FROM numbered WHERE numbered.id = d.id`)
	require.NoError(t, err)
	_, err = a.db.SQL().Exec(`UPDATE webhook_events SET created_at = now() - interval '2 days'`)
	require.NoError(t, err)
	_, err = a.db.SQL().Exec(`INSERT INTO webhook_attempts (id, tenant_id, delivery_id, subscription_id, number, trigger, started_at, duration_ms)
		SELECT gen_random_uuid(), tenant_id, id, subscription_id, 1, 'scheduled', now() - interval '2 days', 5 FROM webhook_deliveries WHERE status <> 'pending'`)
	require.NoError(t, err)
	pendingBefore := hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'`)
	var failed []uuid.UUID
	require.NoError(t, a.db.Gorm().Raw(`SELECT id FROM webhook_deliveries WHERE status = 'failed'`).Scan(&failed).Error)

	// Replica a prunes; replica b sweeps (claiming the due pending rows) and redelivers old failed ones.
	var wg sync.WaitGroup
	var pruned Pruned
	var redelivered sync.Map
	stop := make(chan struct{})
	wg.Add(3)
	go func() {
		defer wg.Done()
		defer close(stop)
		var err error
		pruned, err = a.svc.PruneBefore(ctx, time.Now().Add(-cfg.Retention), cfg.RetentionBatch)
		if err != nil {
			t.Errorf("prune: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := b.svc.Sweep(ctx); err != nil {
				t.Errorf("sweep: %v", err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for _, id := range failed[:50] {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := b.svc.Redeliver(ctx, id, concurrency.Precondition{}); err == nil {
				redelivered.Store(id, true)
			}
		}
	}()
	wg.Wait()

	nRedelivered := 0
	redelivered.Range(func(_, _ any) bool { nRedelivered++; return true })
	t.Logf("pruned %d deliveries, %d attempts, %d events; %d failed deliveries redelivered meanwhile",
		pruned.Deliveries, pruned.Attempts, pruned.Events, nRedelivered)
	assert.EqualValues(t, pendingBefore+int64(nRedelivered),
		hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'`),
		"every pending delivery survived, and so did every one a redelivery made pending")
	redelivered.Range(func(id, _ any) bool {
		d, err := a.svc.store.delivery(ctx, id.(uuid.UUID))
		require.NoError(t, err, "a redelivered delivery is kept")
		assert.Equal(t, StatusPending, d.Status)
		return true
	})
	assert.Zero(t, hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_deliveries WHERE status <> 'pending'`), "every old finished delivery went")
	assert.EqualValues(t, 200-nRedelivered, pruned.Deliveries)
	assert.EqualValues(t, pruned.Deliveries, pruned.Attempts, "each with its attempt")
	assert.EqualValues(t, pruned.Events, 200-nRedelivered, "events whose last delivery went")
	assert.EqualValues(t, pendingBefore+int64(nRedelivered), hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_events`),
		"events with a pending delivery stay")
}

func TestRetentionZeroKeepsEverythingAndRecentRowsStay(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg, harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "*")
	h.failedDeliveries(3)
	require.NoError(t, h.svc.Prune(tenantContext()), "retention 0: nothing to do")
	assert.EqualValues(t, 3, hosttest.Count(t, h.db, `SELECT count(*) FROM webhook_deliveries`))

	p, err := h.svc.PruneBefore(tenantContext(), time.Now().Add(-time.Hour), 10)
	require.NoError(t, err)
	assert.Equal(t, Pruned{}, p, "finished an hour ago or less: kept")
}
