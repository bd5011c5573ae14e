package webhooks

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// dueDelivery publishes an event to one subscription and makes its delivery due now, as if the
// claim's lease had expired (a lost message or a crashed replica).
func (h *harness) dueDelivery(eventType string) uuid.UUID {
	h.t.Helper()
	res, err := h.svc.PublishEvent(tenantContext(), EventInput{Type: eventType, Data: []byte(`{"n":1}`)})
	require.NoError(h.t, err)
	require.Equal(h.t, 1, res.Deliveries)
	var id string
	require.NoError(h.t, h.db.SQL().QueryRow(`UPDATE webhook_deliveries SET next_attempt_at = now() - interval '1 second'
		WHERE event_id = $1 RETURNING id`, res.ID).Scan(&id))
	return uuid.MustParse(id)
}

func TestShouldRefuseTheSecondClaimWhenTwoReplicasClaimTheSameRow(t *testing.T) {
	a := newHarness(t, testConfig(), harnessOptions{})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database})
	rc := newReceiver(t, nil)
	a.subscribe(rc.URL, "*")
	id := a.dueDelivery("order.created")
	ctx := tenantContext()

	first, err := a.svc.store.delivery(ctx, id)
	require.NoError(t, err)
	second, err := b.svc.store.delivery(ctx, id)
	require.NoError(t, err)
	require.Equal(t, first.Version, second.Version)

	winner := first.Claim(time.Now(), time.Minute, "test")
	require.NoError(t, a.db.WithTx(ctx, func(ctx context.Context) error { return a.svc.store.saveDelivery(ctx, first) }))
	second.Claim(time.Now(), time.Minute, "test")
	err = b.db.WithTx(ctx, func(ctx context.Context) error { return b.svc.store.saveDelivery(ctx, second) })

	var conflict *concurrency.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, "Delivery", conflict.EntityType())
	stored, err := a.svc.store.delivery(ctx, id)
	require.NoError(t, err)
	require.Equal(t, winner, *stored.ClaimID, "the stored claim is the winner's")
}

// roundBarrier holds every UPDATE of a delivery until both contenders of a round reached theirs,
// so both have read the same row version: each round is a real race.
type roundBarrier struct {
	mu      sync.Mutex
	arrived int
	release chan struct{}
}

func newRoundBarrier() *roundBarrier { return &roundBarrier{release: make(chan struct{})} }

func (r *roundBarrier) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrived, r.release = 0, make(chan struct{})
}

func (r *roundBarrier) wait() {
	r.mu.Lock()
	r.arrived++
	ch := r.release
	if r.arrived == 2 {
		close(ch)
	}
	r.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(5 * time.Second): // a contender that never writes must not hang the test
	}
}

func installBarrier(t *testing.T, db *gorm.DB, name string, b *roundBarrier) {
	t.Helper()
	require.NoError(t, db.Callback().Update().Before("gorm:update").Register(name, func(tx *gorm.DB) {
		if tx.Statement.Schema != nil && tx.Statement.Schema.Table == "webhook_deliveries" {
			b.wait()
		}
	}))
}

func TestSweepAgainstRedeliverOneCommitWinsEachRoundAndTheLoserLeavesNothing(t *testing.T) {
	const rounds = 50
	sweeper := newHarness(t, testConfig(), harnessOptions{})
	api := newHarness(t, testConfig(), harnessOptions{database: sweeper.database})
	rc := newReceiver(t, nil)
	sweeper.subscribe(rc.URL, "*")
	barrier := newRoundBarrier()
	installBarrier(t, sweeper.db.Gorm(), "test:barrier_sweeper", barrier)
	installBarrier(t, api.db.Gorm(), "test:barrier_api", barrier)

	current := map[uuid.UUID]uuid.UUID{} // delivery → the claim that must be sent
	sweepWins, redeliverWins := 0, 0
	for round := range rounds {
		id := sweeper.dueDelivery("race.round")
		barrier.reset()
		var wg sync.WaitGroup
		var sweepErr, redeliverErr error
		var redelivered Delivery
		wg.Add(2)
		go func() { defer wg.Done(); sweepErr = sweeper.svc.Sweep(tenantContext()) }()
		go func() {
			defer wg.Done()
			redelivered, redeliverErr = api.svc.Redeliver(tenantContext(), id, concurrency.Precondition{})
		}()
		wg.Wait()
		require.NoError(t, sweepErr, "round %d: a lost sweep is not an error", round)

		stored, err := sweeper.svc.store.delivery(tenantContext(), id)
		require.NoError(t, err)
		var requests []uuid.UUID
		for _, r := range sweeper.deliveryRequests() {
			if r.DeliveryID == id {
				requests = append(requests, r.ClaimID)
			}
		}
		require.Len(t, requests, 2, "round %d: the fan-out's request and the winner's, none from the loser", round)
		require.Equal(t, requests[1], *stored.ClaimID, "round %d: the stored claim is the winner's", round)
		if redeliverErr == nil {
			redeliverWins++
			require.Equal(t, *redelivered.ClaimID, requests[1])
			require.Equal(t, TriggerRedeliver, stored.NextTrigger)
		} else {
			sweepWins++
			var conflict *concurrency.ConflictError
			require.True(t, errors.As(redeliverErr, &conflict), "round %d: %v", round, redeliverErr)
			require.Equal(t, TriggerScheduled, stored.NextTrigger)
		}
		current[id] = requests[1]
	}
	require.Equal(t, rounds, sweepWins+redeliverWins)
	t.Logf("sweep won %d rounds, redeliver won %d", sweepWins, redeliverWins)

	// Now let the messages flow: every delivery has two requests in the outbox, one stale.
	// The receiver must get exactly one request per delivery: the current claim's.
	require.NoError(t, sweeper.db.Gorm().Callback().Update().Remove("test:barrier_sweeper"))
	// With the sweep: a request the send gate puts back (a burst to a new endpoint) is claimed again.
	consumer := newHarness(t, testConfig(), harnessOptions{database: sweeper.database, bus: true, jobs: true})
	hosttest.Eventually(t, 30*time.Second, func() bool {
		return hosttest.Metric(t, consumer.registry, "keelson_webhooks_delivery_outcomes_total", "outcome", "succeeded") == rounds &&
			hosttest.Metric(t, consumer.registry, "keelson_webhooks_stale_requests_total") == rounds
	}, "all deliveries sent once and every stale request dropped")
	require.Equal(t, rounds, rc.count(), "one request per current claim, none for stale ones")
	seen := map[string]int{}
	for _, r := range rc.received() {
		seen[r.header.Get("webhook-id")]++
	}
	require.Len(t, seen, rounds)
	for id := range current {
		d, attempts, err := consumer.svc.Delivery(tenantContext(), id)
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, d.Status)
		require.Len(t, attempts, 1)
		require.Equal(t, d.NextTrigger, attempts[0].Trigger)
	}
}

func TestConcurrentRedeliveriesThroughTheAPIAnswer202Or409AndOnlyWinnersPublish(t *testing.T) {
	a := newHarness(t, testConfig(), harnessOptions{})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database})
	rc := newReceiver(t, nil)
	a.subscribe(rc.URL, "*")
	id := a.dueDelivery("race.api")
	before := len(a.deliveryRequests())

	const callers = 20
	statuses := make([]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := a
			if i%2 == 1 {
				h = b
			}
			r := h.call(http.MethodPost, "/deliveries/"+id.String()+"/redeliver", nil)
			statuses[i] = r.status
			if r.status == http.StatusConflict {
				require.Equal(t, "concurrency_conflict", r.json(t)["code"])
			}
		}()
	}
	wg.Wait()
	won := 0
	for _, s := range statuses {
		require.Contains(t, []int{http.StatusAccepted, http.StatusConflict}, s)
		if s == http.StatusAccepted {
			won++
		}
	}
	require.GreaterOrEqual(t, won, 1)
	requests := a.deliveryRequests()
	require.Len(t, requests, before+won, "each 202 published one request, each 409 none")
	stored, err := a.svc.store.delivery(tenantContext(), id)
	require.NoError(t, err)
	require.Equal(t, requests[len(requests)-1].ClaimID, *stored.ClaimID)
}

func TestTheSweepReportsTheDueBacklogAndClaimsExpiredLeases(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "*")
	first := h.dueDelivery("backlog.one")
	second := h.dueDelivery("backlog.two")
	before := len(h.deliveryRequests())

	require.NoError(t, h.svc.Sweep(tenantContext()))

	require.Equal(t, 2.0, hosttest.Metric(t, h.registry, "keelson_webhooks_due_backlog"))
	requests := h.deliveryRequests()[before:]
	require.Len(t, requests, 2)
	for _, id := range []uuid.UUID{first, second} {
		d, err := h.svc.store.delivery(tenantContext(), id)
		require.NoError(t, err)
		require.True(t, d.NextAttemptAt.After(time.Now().Add(testConfig().ClaimLease/2)), "claimed for a lease")
		claimed := false
		for _, r := range requests {
			claimed = claimed || (r.DeliveryID == id && *d.ClaimID == r.ClaimID)
		}
		require.True(t, claimed, "the published request carries the stored claim")
	}
	require.NoError(t, h.svc.Sweep(tenantContext()))
	require.Equal(t, 0.0, hosttest.Metric(t, h.registry, "keelson_webhooks_due_backlog"))
	require.Len(t, h.deliveryRequests(), before+2, "nothing due, nothing claimed")
}

func TestASweepGivesAFailingSubscriptionOneTurnAndItsFurtherTurnsAfterEveryHealthyOnes(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	failing, _ := h.subscribe(rc.URL, "failing.*")
	healthy, _ := h.subscribe(rc.URL, "healthy.*")
	for range 5 {
		h.dueDelivery("failing.tick")
	}
	for range 3 {
		h.dueDelivery("healthy.tick")
	}
	_, err := h.db.SQL().Exec(`UPDATE webhook_subscription_health SET failing_since = now(), consecutive_failures = 3
		WHERE subscription_id = $1`, failing)
	require.NoError(t, err)

	due, err := h.svc.store.dueDeliveries(tenantContext(), time.Now(), 4, 3)
	require.NoError(t, err)

	of := map[string]int{}
	for _, d := range due {
		of[d.SubscriptionID.String()]++
	}
	require.Equal(t, map[string]int{failing: 1, healthy: 3}, of, "the healthy one's three turns come before the failing one's second")
}

func TestAFailingSubscriptionsNewDeliveryWaitsUnclaimedForTheSweepWhileAHealthyOnesIsRequestedAtOnce(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	failing, _ := h.subscribe(rc.URL, "order.*")
	healthy, _ := h.subscribe(rc.URL, "order.*")
	_, err := h.db.SQL().Exec(`UPDATE webhook_subscription_health SET failing_since = now(), consecutive_failures = 3
		WHERE subscription_id = $1`, failing)
	require.NoError(t, err)
	before := len(h.deliveryRequests())

	res, err := h.svc.PublishEvent(tenantContext(), EventInput{Type: "order.created", Data: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, 2, res.Deliveries)

	requests := h.deliveryRequests()[before:]
	require.Len(t, requests, 1)
	require.Equal(t, healthy, requests[0].SubscriptionID.String())
	var claimed, due bool
	require.NoError(t, h.db.SQL().QueryRow(`SELECT claim_id IS NOT NULL, next_attempt_at <= now() FROM webhook_deliveries
		WHERE event_id = $1 AND subscription_id = $2`, res.ID, failing).Scan(&claimed, &due))
	require.False(t, claimed, "nobody holds it")
	require.True(t, due, "the sweep may claim it at once")

	require.NoError(t, h.svc.Sweep(tenantContext()))
	requests = h.deliveryRequests()[before:]
	require.Len(t, requests, 2)
	require.Equal(t, failing, requests[1].SubscriptionID.String(), "the sweep requested it")
}
