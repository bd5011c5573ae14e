package webhooks

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

// handleCopies hands copies of one request message (the same event: same id, same payload)
// to the consumers of two replicas, alternately, released together so they race for the claim.
func handleCopies(t *testing.T, replicas []*harness, e messaging.Event, copies int) {
	t.Helper()
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	errs := make([]error, copies)
	for i := range copies {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			errs[i] = replicas[i%len(replicas)].svc.handleDeliveryRequested(tenantContext(), e)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	for i, err := range errs {
		require.NoError(t, err, "copy %d", i)
	}
}

func staleTotal(t *testing.T, replicas []*harness) float64 {
	total := 0.0
	for _, h := range replicas {
		total += hosttest.Metric(t, h.registry, "keelson_webhooks_stale_requests_total")
	}
	return total
}

// requestEvent is a request message naming one delivery, as the sweep publishes it for a lone due delivery.
func requestEvent(t *testing.T, p contract.DeliveryRequestedPayload) messaging.Event {
	t.Helper()
	return requestsEvent(t, []contract.DeliveryRequestedPayload{p})
}

// requestsEvent is a request message naming the deliveries of reqs.
func requestsEvent(t *testing.T, reqs []contract.DeliveryRequestedPayload) messaging.Event {
	t.Helper()
	e, err := messaging.NewEvent(tenantContext(), contract.Source, contract.DeliveriesRequested,
		contract.DeliveriesRequestedPayload{Deliveries: reqs})
	require.NoError(t, err)
	return e
}

func TestCopiesOfOneRequestHandledAtOnceOnTwoReplicasSendOncePerClaim(t *testing.T) {
	const rounds = 30
	a := newHarness(t, testConfig(), harnessOptions{})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database})
	replicas := []*harness{a, b}
	// A receiver that takes a moment keeps every copy's read inside the first copy's send.
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(5 * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	})
	a.subscribe(rc.URL, "*")
	ctx := tenantContext()

	receipts := func(webhookID string) int {
		n := 0
		for _, r := range rc.received() {
			if r.header.Get("webhook-id") == webhookID {
				n++
			}
		}
		return n
	}
	claims := 0
	for round := range rounds {
		res, err := a.svc.PublishEvent(ctx, EventInput{Type: "copies.round", Data: []byte(`{"round":1}`)})
		require.NoError(t, err)
		require.Equal(t, 1, res.Deliveries)
		var born Delivery
		require.NoError(t, a.db.Conn(tenantContext()).Where("event_id = ?", res.ID).Take(&born).Error)
		fanout := a.deliveryRequestsOf(born.ID)
		require.Len(t, fanout, 1, "round %d: the fan-out's request is in the outbox", round)
		req := fanout[0]

		copies := 2 + round%3
		staleBefore := staleTotal(t, replicas)
		handleCopies(t, replicas, requestEvent(t, req), copies)
		claims++
		require.Equal(t, 1, receipts(res.ID), "round %d: %d copies of the born claim, one request", round, copies)
		require.Equal(t, staleBefore+float64(copies-1), staleTotal(t, replicas), "round %d: every other copy counted stale", round)
		d, attempts, err := a.svc.Delivery(ctx, req.DeliveryID)
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, d.Status)
		require.Len(t, attempts, 1, "round %d", round)
		require.Equal(t, req.ClaimID, *d.SentClaimID, "round %d: the taken claim is the request's", round)

		if round%3 != 0 {
			continue
		}
		// A redelivery is a new claim: copies of it send once more; copies of the old claim, mixed in, nothing.
		redelivered, err := b.svc.Redeliver(ctx, req.DeliveryID, concurrency.Precondition{})
		require.NoError(t, err)
		fresh := requestEvent(t, contract.DeliveryRequestedPayload{DeliveryID: req.DeliveryID, ClaimID: *redelivered.ClaimID})
		old := requestEvent(t, req)
		staleBefore = staleTotal(t, replicas)
		var wg sync.WaitGroup
		for _, e := range []messaging.Event{fresh, old} {
			wg.Add(1)
			go func() { defer wg.Done(); handleCopies(t, replicas, e, 3) }()
		}
		wg.Wait()
		claims++
		require.Equal(t, 2, receipts(res.ID), "round %d: one request for the redelivery's claim, none for the old one", round)
		require.Equal(t, staleBefore+5, staleTotal(t, replicas), "round %d: 2 copies of the new claim and 3 of the old one stale", round)
		_, attempts, err = a.svc.Delivery(ctx, req.DeliveryID)
		require.NoError(t, err)
		require.Len(t, attempts, 2)
		require.Equal(t, TriggerRedeliver, attempts[1].Trigger)
	}
	require.Equal(t, claims, rc.count(), "exactly one request per claim over all rounds")
	t.Logf("%d rounds, %d claims, %d requests received, %.0f copies dropped as stale", rounds, claims, rc.count(), staleTotal(t, replicas))
}

func TestCopiesForAPausedSubscriptionSendNothingAndEachDeliveryIsSentOnceAfterResume(t *testing.T) {
	a := newHarness(t, testConfig(), harnessOptions{})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database})
	replicas := []*harness{a, b}
	rc := newReceiver(t, nil)
	subID, _ := a.subscribe(rc.URL, "*")
	ctx := tenantContext()
	const rounds = 10
	for range rounds {
		_, err := a.svc.PublishEvent(ctx, EventInput{Type: "copies.paused", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	_, err := a.svc.PauseSubscription(ctx, uuid.MustParse(subID), concurrency.Precondition{})
	require.NoError(t, err)

	requests := a.deliveryRequests()
	require.Len(t, requests, rounds)
	staleBefore := staleTotal(t, replicas)
	for i, req := range requests {
		handleCopies(t, replicas, requestEvent(t, req), 2+i%3)
		d, attempts, err := a.svc.Delivery(ctx, req.DeliveryID)
		require.NoError(t, err)
		require.Equal(t, StatusPending, d.Status, "it waits")
		require.Equal(t, req.ClaimID, *d.ClaimID, "its claim is left untaken")
		require.Nil(t, d.SentClaimID)
		require.Empty(t, attempts)
	}
	require.Zero(t, rc.count())
	require.Greater(t, staleTotal(t, replicas), staleBefore)
	require.NoError(t, a.svc.Sweep(ctx))
	require.Len(t, a.deliveryRequests(), rounds, "the sweep skips a paused subscription")

	// Resume: the waiting deliveries are due at once; the sweep claims them, each is sent once.
	_, err = b.svc.ResumeSubscription(ctx, uuid.MustParse(subID), concurrency.Precondition{})
	require.NoError(t, err)
	require.NoError(t, a.svc.Sweep(ctx))
	fresh := a.deliveryRequests()[rounds:]
	require.Len(t, fresh, rounds)
	for i, req := range append(fresh, requests...) { // the old claims, handled again, are stale now
		handleCopies(t, replicas, requestEvent(t, req), 2+i%2)
	}
	require.Equal(t, rounds, rc.count(), "each delivery sent once")
	for _, req := range requests {
		d, attempts, err := a.svc.Delivery(ctx, req.DeliveryID)
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, d.Status)
		require.Len(t, attempts, 1)
		require.Equal(t, 1, d.AttemptCount, "waiting spent no attempt")
	}
}

func TestAClaimTakenByAConsumerThatDiedIsClaimedAgainAfterTheLeaseAndSentOnce(t *testing.T) {
	cfg := testConfig()
	cfg.SendTimeout, cfg.ClaimLease = 500*time.Millisecond, 2500*time.Millisecond // a take may write for 1 s
	dead := newHarness(t, cfg, harnessOptions{})
	var mu sync.Mutex
	var receivedAt []time.Time
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		receivedAt = append(receivedAt, time.Now())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	dead.subscribe(rc.URL, "*")
	ctx := tenantContext()
	published := time.Now()
	res, err := dead.svc.PublishEvent(ctx, EventInput{Type: "taken.then.died", Data: []byte(`{}`)})
	require.NoError(t, err)
	requests := dead.deliveryRequests()
	require.Len(t, requests, 1)
	original := requests[0]

	// The consumer of the dead replica took the claim, then died: no send, no outcome.
	leaseUntil := time.Now().UTC().Add(cfg.ClaimLease).Truncate(time.Microsecond)
	_, taken, err := dead.svc.store.takeClaim(ctx, takeRequest{DeliveryID: original.DeliveryID, Claim: original.ClaimID,
		AttemptID: uuid.New()}, takeTerms{Now: time.Now(), LeaseUntil: leaseUntil, Instance: "dead:1", AbandonedBefore: time.Now().Add(-cfg.SendTimeout)})
	require.NoError(t, err)
	require.True(t, taken)
	stored, _, err := dead.svc.Delivery(ctx, original.DeliveryID)
	require.NoError(t, err)
	require.True(t, leaseUntil.Equal(*stored.NextAttemptAt), "the take restarted the lease: the sweep waits for it")

	// A live replica gets the original message again (the outbox forwards it) and runs the sweep.
	live := newHarness(t, cfg, harnessOptions{database: dead.database, bus: true, jobs: true})
	hosttest.Eventually(t, 20*time.Second, func() bool {
		d, _, err := live.svc.Delivery(ctx, original.DeliveryID)
		return err == nil && d.Status == StatusSucceeded
	}, "the delivery is sent after the lease")
	// The original request may be consumed after the sweep's claim was sent when the live replica starts after the lease.
	hosttest.Eventually(t, 30*time.Second, func() bool {
		return hosttest.Metric(t, live.registry, "keelson_webhooks_stale_requests_total") == 1.0
	}, "the original request arrived with its claim taken and sent nothing")

	d, attempts, err := live.svc.Delivery(ctx, original.DeliveryID)
	require.NoError(t, err)
	require.Len(t, attempts, 2, "the dead replica's take opened an attempt; the live one's sent")
	require.Equal(t, ResultUnknown, attempts[0].Result, "the next take closed the abandoned attempt")
	require.Equal(t, "dead:1", attempts[0].Instance)
	require.Equal(t, ResultSucceeded, attempts[1].Result)
	require.Equal(t, live.svc.instance, attempts[1].Instance)
	require.Equal(t, TriggerScheduled, attempts[1].Trigger)
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(live.observedRequests(original.DeliveryID)) == 2 },
		"the fan-out's request and the sweep's observed")
	var reclaimed uuid.UUID
	for _, r := range live.observedRequests(original.DeliveryID) {
		if r.ClaimID != original.ClaimID {
			reclaimed = r.ClaimID
		}
	}
	require.NotEqual(t, uuid.Nil, reclaimed, "the sweep published a new claim")
	require.Equal(t, reclaimed, *d.SentClaimID, "the sweep's new claim was taken and sent")
	require.Equal(t, 1, rc.count(), "sent once")
	require.Equal(t, res.ID, rc.received()[0].header.Get("webhook-id"))
	mu.Lock()
	defer mu.Unlock()
	require.False(t, receivedAt[0].Before(published.Add(cfg.ClaimLease)), "not before the taken claim's lease ended")
}

// deliveryRequestsOf are the outbox's requests of one delivery, oldest first.
func (h *harness) deliveryRequestsOf(id uuid.UUID) []contract.DeliveryRequestedPayload {
	var out []contract.DeliveryRequestedPayload
	for _, r := range h.deliveryRequests() {
		if r.DeliveryID == id {
			out = append(out, r)
		}
	}
	return out
}

func TestATakeSoonAfterTheClaimKeepsItsLeaseAndALateOneRestartsIt(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	h.subscribe("http://127.0.0.1:9/", "*")
	ctx := tenantContext()
	take := func(r contract.DeliveryRequestedPayload, now time.Time) *Delivery {
		t.Helper()
		lease := testConfig().ClaimLease
		terms := takeTerms{Now: now, LeaseUntil: now.Add(lease), KeepLeaseFrom: now.Add(keptLease(lease, testConfig().SendTimeout, testConfig().takeWriteBound())),
			Instance: "test", AbandonedBefore: now.Add(-time.Minute)}
		tk, ok, err := h.svc.store.takeClaim(ctx, takeRequest{DeliveryID: r.DeliveryID, Claim: r.ClaimID, AttemptID: uuid.New()}, terms)
		require.NoError(t, err)
		require.True(t, ok)
		return tk.delivery
	}

	_, err := h.svc.PublishEvent(ctx, EventInput{Type: "lease.kept", Data: []byte(`{}`)})
	require.NoError(t, err)
	soon := h.deliveryRequests()[0]
	claimed, err := h.svc.store.delivery(ctx, soon.DeliveryID)
	require.NoError(t, err)
	taken := take(soon, time.Now().UTC())
	require.True(t, claimed.NextAttemptAt.Equal(*taken.NextAttemptAt), "the claim's lease still covers the send: left as it is")

	_, err = h.svc.PublishEvent(ctx, EventInput{Type: "lease.restarted", Data: []byte(`{}`)})
	require.NoError(t, err)
	late := h.deliveryRequests()[1]
	now := time.Now().UTC().Add(40 * time.Second).Truncate(time.Microsecond) // the request waited in the queue
	taken = take(late, now)
	require.True(t, now.Add(testConfig().ClaimLease).Equal(*taken.NextAttemptAt), "too little lease left: a whole one from the take")
}

// takeClaim takes one claim for the tenant of ctx (store.takeClaims for a batch of one); a request
// without KeepLeaseFrom always restarts the lease.
func (s store) takeClaim(ctx context.Context, r takeRequest, terms takeTerms) (t taken, ok bool, err error) {
	if r.Tenant, err = tenancy.Require(ctx); err != nil {
		return taken{}, false, err
	}
	if terms.KeepLeaseFrom.IsZero() {
		terms.KeepLeaseFrom = terms.LeaseUntil
	}
	res, err := s.takeClaims(ctx, terms, []takeRequest{r})
	if err != nil {
		return taken{}, false, err
	}
	return res[0].taken, res[0].ok, nil
}
