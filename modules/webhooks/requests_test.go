package webhooks

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/tenancy"
)

func TestAnEventsDeliveriesShareOneRequestAndItsCopiesOnTwoReplicasSendEachDeliveryOnce(t *testing.T) {
	const subscriptions, copies = 5, 3
	a := newHarness(t, testConfig(), harnessOptions{})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database})
	replicas := []*harness{a, b}
	var mu sync.Mutex
	perEndpoint := map[string]int{}
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perEndpoint[r.URL.Path]++
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // every copy arrives while the first one's sends run
		w.WriteHeader(http.StatusNoContent)
	})
	for i := range subscriptions {
		a.subscribe(fmt.Sprintf("%s/endpoint-%d", rc.URL, i), "*")
	}
	ctx := tenantContext()
	res, err := a.svc.PublishEvent(ctx, EventInput{Type: "shared.request", Data: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, subscriptions, res.Deliveries)

	messages := a.requestMessages()
	require.Len(t, messages, 1, "one request message for all of the event's deliveries")
	reqs := messages[0].Deliveries
	require.Len(t, reqs, subscriptions)

	staleBefore := staleTotal(t, replicas)
	handleCopies(t, replicas, requestsEvent(t, reqs), copies)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, perEndpoint, subscriptions, "every endpoint was sent to")
	for p, n := range perEndpoint {
		require.Equal(t, 1, n, "%s: one request for %d copies of its claim", p, copies)
	}
	require.Equal(t, staleBefore+float64((copies-1)*subscriptions), staleTotal(t, replicas), "every other copy of each delivery is stale")
	for _, req := range reqs {
		d, attempts, err := a.svc.Delivery(ctx, req.DeliveryID)
		require.NoError(t, err)
		require.Equal(t, StatusSucceeded, d.Status)
		require.Len(t, attempts, 1)
	}
}

func TestAReplicaHandlesAtMostItsConcurrencyOfDeliveriesHoweverManyARequestNames(t *testing.T) {
	const handlers, deliveries = 2, 6
	cfg := testConfig()
	cfg.Concurrency = handlers
	h := newHarness(t, cfg, harnessOptions{})
	var mu sync.Mutex
	inFlight, most := 0, 0
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	h.subscribe(rc.URL, "*")
	ctx := tenantContext()
	for range deliveries + 1 {
		_, err := h.svc.PublishEvent(ctx, EventInput{Type: "many.requested", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	reqs := h.deliveryRequests()
	require.Len(t, reqs, deliveries+1)
	// The first delivery, alone, tells the send gate the endpoint is fast: up to 32 sends at once.
	require.NoError(t, h.svc.handleDeliveryRequested(ctx, requestEvent(t, reqs[0])))
	mu.Lock()
	most = 0
	mu.Unlock()

	require.NoError(t, h.svc.handleDeliveryRequested(ctx, requestsEvent(t, reqs[1:])))
	require.Equal(t, deliveries+1, rc.count(), "every delivery was sent")
	require.Equal(t, handlers, most, "as many sends at once as the replica has handler places, no more")
}

func TestRequestMessagesNameDeliveriesOfOneTenantAndAtMostABatchEach(t *testing.T) {
	svc := &Service{}
	tenantA, tenantB := uuid.New(), uuid.New()
	var ds []*Delivery
	for i := range 2*requestBatch + 5 {
		tenant := tenantA
		if i%40 == 7 {
			tenant = tenantB
		}
		d, _, err := newDelivery(uuid.New(), "e", "t", time.Now(), time.Minute, "test")
		require.NoError(t, err)
		d.TenantID = tenant
		ds = append(ds, d)
	}
	events, err := svc.deliveryRequests(tenancy.System(t.Context(), "test"), ds)
	require.NoError(t, err)
	named := map[uuid.UUID]int{}
	perTenant := map[uuid.UUID]int{}
	for _, e := range events {
		require.Equal(t, contract.DeliveriesRequested, e.Type)
		var p contract.DeliveriesRequestedPayload
		require.NoError(t, e.Decode(&p))
		require.NotEmpty(t, p.Deliveries)
		require.LessOrEqual(t, len(p.Deliveries), requestBatch)
		perTenant[e.TenantID]++
		for _, r := range p.Deliveries {
			named[r.DeliveryID]++
		}
	}
	for _, d := range ds {
		require.Equal(t, 1, named[d.ID], "delivery %s named once", d.ID)
		require.Contains(t, perTenant, d.TenantID)
	}
	require.Equal(t, map[uuid.UUID]int{tenantA: 3, tenantB: 1}, perTenant, "each tenant's deliveries in as few messages as the batch allows")
}

func TestTheDeliveriesOfOneEventTakenTogetherShareOneRequestBody(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	for i := range 3 {
		h.subscribe(fmt.Sprintf("http://127.0.0.1:9/endpoint-%d", i), "*")
	}
	ctx := tenantContext()
	res, err := h.svc.PublishEvent(ctx, EventInput{Type: "one.body", Data: []byte(`{"n": 1}`)})
	require.NoError(t, err)
	var reqs []takeRequest
	for _, r := range h.deliveryRequests() {
		attempt, err := uuid.NewV7()
		require.NoError(t, err)
		reqs = append(reqs, takeRequest{DeliveryID: r.DeliveryID, Claim: r.ClaimID, Tenant: tenancy.DefaultID, AttemptID: attempt})
	}
	require.Len(t, reqs, 3)
	took, err := h.svc.writeTakes(ctx, reqs)
	require.NoError(t, err)
	want, err := (&eventRecord{ID: res.ID, Type: "one.body", Data: []byte(`{"n": 1}`), CreatedAt: took[0].event.CreatedAt}).body()
	require.NoError(t, err)
	for i, r := range took {
		require.True(t, r.ok, "delivery %d taken", i)
		require.NoError(t, r.body.err)
		require.Equal(t, string(want), string(r.body.bytes), "delivery %d: the body every attempt of the event sends", i)
		require.Same(t, &took[0].body.bytes[0], &r.body.bytes[0], "delivery %d: built once for the batch", i)
	}
}
