package webhooks

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

// otherTenant creates a second tenant and returns a context acting for it.
func (h *harness) otherTenant(name string) (uuid.UUID, context.Context) {
	h.t.Helper()
	id := dbtest.Tenant(h.t, h.db, name)
	return id, tenancy.With(context.Background(), id)
}

func (h *harness) setTenantDisabled(id uuid.UUID, disabled bool) {
	h.t.Helper()
	require.NoError(h.t, h.db.Gorm().Exec(`UPDATE tenants SET disabled_at = CASE WHEN ? THEN now() END WHERE id = ?`, disabled, id).Error)
}

// disabledTenantSubscribedTo makes tenant "b" with one subscription, then disables it.
func (h *harness) disabledTenantSubscribedTo(url string, patterns ...string) (uuid.UUID, context.Context) {
	h.t.Helper()
	b, ctxB := h.otherTenant("b")
	h.subscribeAs(ctxB, url, patterns...)
	h.setTenantDisabled(b, true)
	return b, ctxB
}

func (h *harness) subscribeAs(ctx context.Context, url string, patterns ...string) Subscription {
	h.t.Helper()
	sub, _, err := h.svc.CreateSubscription(ctx, SubscriptionInput{URL: url, EventTypes: patterns})
	require.NoError(h.t, err)
	return sub
}

func TestAnIntegrationEventOfOneTenantNeverReachesASubscriptionOfAnother(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{bus: true})
	rcA, rcB := newReceiver(t, nil), newReceiver(t, nil)
	ctxA := tenantContext()
	_, ctxB := h.otherTenant("b")
	h.subscribeAs(ctxA, rcA.URL, "invoice.*")
	h.subscribeAs(ctxB, rcB.URL, "invoice.*")

	publish := func(ctx context.Context, n int) messaging.Event {
		e, err := messaging.NewEvent(ctx, "invoices", "invoice.sent", map[string]any{"n": n})
		require.NoError(t, err)
		require.NoError(t, h.db.WithTx(ctx, func(ctx context.Context) error { return h.svc.events.Publish(ctx, e) }))
		return e
	}
	ofA := publish(ctxA, 1)
	hosttest.Eventually(t, 20*time.Second, func() bool { return rcA.count() == 1 }, "a's receiver got a's event")
	ofB := publish(ctxB, 2)
	hosttest.Eventually(t, 20*time.Second, func() bool { return rcB.count() == 1 }, "b's receiver got b's event")
	hosttest.Eventually(t, 30*time.Second, func() bool { return hosttest.Count(t, h.db, "SELECT count(*) FROM outbox_messages") == 0 }, "outbox drained")

	require.Equal(t, ofA.ID, rcA.received()[0].header.Get("webhook-id"))
	require.Equal(t, ofB.ID, rcB.received()[0].header.Get("webhook-id"))
	require.Equal(t, 1, rcA.count(), "a's receiver got nothing of b")
	require.Equal(t, int64(1), hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_deliveries WHERE event_id = $1", ofA.ID),
		"a's event fanned out to a's subscription only")
	require.Equal(t, int64(1), hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_deliveries WHERE event_id = $1", ofB.ID))

	// Each tenant sees its own deliveries only, and reading another's by id is not found.
	listA, err := h.svc.Deliveries(ctxA, DeliveryFilter{}, uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, listA, 1)
	require.Equal(t, ofA.ID, listA[0].EventID)
	_, _, err = h.svc.Delivery(ctxB, listA[0].ID)
	require.Error(t, err, "b reading a's delivery")
}

func TestClientEventIdsAreUniquePerTenant(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	_, ctxB := h.otherTenant("b")
	in := EventInput{ID: "evt_same", Type: "order.created", Data: []byte(`{"n":1}`)}
	first, err := h.svc.PublishEvent(tenantContext(), in)
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	other, err := h.svc.PublishEvent(ctxB, EventInput{ID: "evt_same", Type: "order.created", Data: []byte(`{"n":2}`)})
	require.NoError(t, err, "another tenant's id is no conflict")
	require.False(t, other.Duplicate)
	again, err := h.svc.PublishEvent(ctxB, EventInput{ID: "evt_same", Type: "order.created", Data: []byte(`{"n":2}`)})
	require.NoError(t, err)
	require.True(t, again.Duplicate, "within one tenant the id is idempotent")
	require.Equal(t, int64(2), hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_events WHERE id = 'evt_same'"))
}

func TestADisabledTenantsDeliveriesWaitPendingWithoutAnAttemptUntilItIsEnabled(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	b, ctxB := h.disabledTenantSubscribedTo(rc.URL, "order.*")

	res, err := h.svc.PublishEvent(ctxB, EventInput{Type: "order.created", Data: []byte(`{"n":1}`)})
	require.NoError(t, err)
	require.Equal(t, 1, res.Deliveries)
	var born Delivery
	require.NoError(t, h.db.Conn(ctxB).Where("event_id = ?", res.ID).Take(&born).Error)
	requests := h.deliveryRequestsOf(born.ID)
	require.Len(t, requests, 1)

	// The request arrives while the tenant is disabled: nothing is sent and no attempt is spent.
	require.NoError(t, h.svc.handleDeliveryRequested(ctxB, requestEvent(t, requests[0])))
	// The lease ends: the sweep leaves the delivery of a disabled tenant alone.
	expire := func() {
		require.NoError(t, h.db.Gorm().Exec(`UPDATE webhook_deliveries SET next_attempt_at = now() - interval '1 second' WHERE id = ?`, born.ID).Error)
	}
	expire()
	require.NoError(t, h.svc.Sweep(context.Background()))
	require.Len(t, h.deliveryRequestsOf(born.ID), 1, "the sweep claimed nothing of a disabled tenant")
	require.Equal(t, 0.0, hosttest.Metric(t, h.registry, "keelson_webhooks_due_backlog"), "a disabled tenant's delivery waits outside the backlog")
	d, attempts, err := h.svc.Delivery(ctxB, born.ID)
	require.NoError(t, err)
	require.Equal(t, StatusPending, d.Status)
	require.Zero(t, d.AttemptCount)
	require.Empty(t, attempts)
	require.Zero(t, rc.count())

	// Enabled again: the next sweep claims it and its request sends it.
	h.setTenantDisabled(b, false)
	require.NoError(t, h.svc.Sweep(context.Background()))
	requests = h.deliveryRequestsOf(born.ID)
	require.Len(t, requests, 2, "the sweep claimed the waiting delivery")
	require.NoError(t, h.svc.handleDeliveryRequested(ctxB, requestEvent(t, requests[1])))
	require.Equal(t, 1, rc.count())
	d, attempts, err = h.svc.Delivery(ctxB, born.ID)
	require.NoError(t, err)
	require.Equal(t, StatusSucceeded, d.Status)
	require.Len(t, attempts, 1)
	require.Equal(t, http.StatusNoContent, *attempts[0].StatusCode)
}

func TestEnablingATenantClaimsAfreshOnlyTheClaimsIssuedBeforeItWasEnabled(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	b, ctxB := h.disabledTenantSubscribedTo(rc.URL, "order.*")
	publish := func() uuid.UUID {
		t.Helper()
		res, err := h.svc.PublishEvent(ctxB, EventInput{Type: "order.created", Data: []byte(`{}`)})
		require.NoError(t, err)
		var d Delivery
		require.NoError(t, h.db.Conn(ctxB).Where("event_id = ?", res.ID).Take(&d).Error)
		return d.ID
	}
	waited := publish()
	require.NoError(t, h.svc.handleDeliveryRequested(ctxB, requestEvent(t, h.deliveryRequestsOf(waited)[0])), "dropped untaken")

	h.setTenantDisabled(b, false)
	enabledAt := time.Now()
	fresh := publish() // claimed after the enabling, its request not yet handled
	e, err := messaging.NewEvent(ctxB, tenancy.EventSource, tenancy.EventEnabled, tenancy.EnabledPayload{TenantID: b, EnabledAt: enabledAt})
	require.NoError(t, err)
	require.NoError(t, h.svc.handleTenantEnabled(ctxB, e))

	require.Len(t, h.deliveryRequestsOf(waited), 2, "the claim that waited through the disabling is claimed and requested afresh")
	require.Len(t, h.deliveryRequestsOf(fresh), 1, "the fresh fan-out's claim is left to its own request")
}

func TestEnablingATenantSendsItsWaitingDeliveriesAtOnceOnTwoReplicasLongBeforeLeaseOrSweep(t *testing.T) {
	// One event to twenty new endpoints: each gets one request, its probe, and twenty fit in the probe
	// places, so the send gate puts nothing back to wait for the sweep, however slow the machine. (Two
	// requests to one new endpoint at once would: the second waits briefWait for the probe, then the sweep.)
	const subscriptions, events = 20, 1
	const deliveries = subscriptions * events
	cfg := testConfig()
	cfg.SweepInterval, cfg.ClaimLease = 10*time.Minute, 10*time.Minute // neither may be what brings them back
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	b := newHarness(t, cfg, harnessOptions{bus: true, jobs: true, database: a.database})
	replicas := []*harness{a, b}
	rc := newReceiver(t, nil)
	tenant, ctx := a.otherTenant("paused-customer")
	for range subscriptions {
		a.subscribeAs(ctx, rc.URL, "order.*")
	}
	store, err := auth.NewStore(b.db)
	require.NoError(t, err)
	_, err = store.SetTenantDisabled(context.Background(), tenant.String(), true)
	require.NoError(t, err)

	ids := map[string]bool{}
	for i := range events {
		res, err := replicas[i%2].svc.PublishEvent(ctx, EventInput{Type: "order.created", Data: []byte(`{"n":1}`)})
		require.NoError(t, err)
		ids[res.ID] = true
	}
	// Every request is handled while the tenant is disabled: nothing taken, nothing sent, no attempt spent.
	hosttest.Eventually(t, 60*time.Second, func() bool { return staleTotal(t, replicas) >= deliveries },
		"the %d requests handled and dropped untaken", deliveries)
	require.Zero(t, rc.count())
	require.Equal(t, int64(deliveries), hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_deliveries
		WHERE tenant_id = $1 AND status = 'pending' AND attempt_count = 0 AND sent_claim_id IS NULL
			AND next_attempt_at > now() + interval '5 minutes'`, tenant), "every delivery waits for its lease")

	enabled := time.Now()
	_, err = store.SetTenantDisabled(context.Background(), tenant.String(), false)
	require.NoError(t, err)
	hosttest.Eventually(t, 60*time.Second, func() bool { return rc.count() >= deliveries }, "every waiting delivery sent after the enabling")
	took := time.Since(enabled)
	require.Less(t, took, cfg.SweepInterval/2, "sent long before a sweep or a lease's end would have")
	t.Logf("%d waiting deliveries sent %s after the tenant was enabled (sweep interval and lease %s)", deliveries, took.Round(time.Millisecond), cfg.SweepInterval)

	hosttest.Eventually(t, 30*time.Second, func() bool {
		return hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_deliveries WHERE tenant_id = $1 AND status = 'succeeded'`, tenant) == deliveries
	}, "every delivery succeeded")
	sent := map[string]int{}
	for _, r := range rc.received() {
		sent[r.header.Get("webhook-id")]++
	}
	for id := range ids {
		require.Equal(t, subscriptions, sent[id], "event %s sent once to each subscription", id)
	}
	require.Equal(t, int64(deliveries), hosttest.Count(t, a.db, `SELECT count(*) FROM webhook_attempts WHERE tenant_id = $1`, tenant),
		"one attempt per delivery: each claim requested once and taken once")
	requests := map[[2]uuid.UUID]int{}
	for _, h := range replicas {
		h.mu.Lock()
		for _, p := range h.requested {
			requests[[2]uuid.UUID{p.DeliveryID, p.ClaimID}]++
		}
		h.mu.Unlock()
	}
	for pair, n := range requests {
		require.Equal(t, 1, n, "delivery %s claim %s requested once", pair[0], pair[1])
	}
}
