package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
)

func TestEventsFanOutToThreeSubscriptionsWithSignaturesTheReferenceLibraryVerifies(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true})
	all := newReceiver(t, nil)
	proposals := newReceiver(t, nil)
	exact := newReceiver(t, nil)
	_, allSecret := h.subscribe(all.URL+"/all", "*")
	_, proposalsSecret := h.subscribe(proposals.URL+"/p", "proposal.*")
	exactID, exactSecret := h.subscribe(exact.URL+"/e", "conversation.created", "conversation.message.*")

	r := h.call(http.MethodPost, "/events", map[string]any{"id": "evt_client_1", "type": "proposal.accepted", "data": map[string]any{"proposal_id": "p1"}})
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	require.Equal(t, map[string]any{"id": "evt_client_1", "type": "proposal.accepted", "deliveries": 2.0}, r.json(t))
	h.publish("conversation.created", map[string]any{"conversation_id": "c1"})
	h.publish("conversation.message.created", map[string]any{"message_id": "m1"})
	h.publish("unrelated.thing", map[string]any{})

	// The same client id and payload again: 200, the first event is returned and nothing fans out again.
	r = h.call(http.MethodPost, "/events", `{ "data": {"proposal_id" : "p1"}, "type": "proposal.accepted", "id": "evt_client_1" }`)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, map[string]any{"id": "evt_client_1", "type": "proposal.accepted", "deliveries": 2.0, "duplicate": true}, r.json(t))
	// The same id with another type or data: 409 event_id_reused, nothing stored or sent.
	for _, other := range []map[string]any{
		{"id": "evt_client_1", "type": "other.type", "data": map[string]any{"proposal_id": "p1"}},
		{"id": "evt_client_1", "type": "proposal.accepted", "data": map[string]any{"proposal_id": "p2"}},
	} {
		r = h.call(http.MethodPost, "/events", other)
		require.Equal(t, http.StatusConflict, r.status, string(r.body))
		require.Equal(t, CodeEventIDReused, r.json(t)["code"])
	}

	hosttest.Eventually(t, 20*time.Second, func() bool { return all.count() == 4 && proposals.count() == 1 && exact.count() == 2 },
		"receivers got %d, %d, %d requests", all.count(), proposals.count(), exact.count())

	verify := func(rc *receiver, secret string, wantTypes ...string) {
		t.Helper()
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		var types []string
		for _, req := range rc.received() {
			require.NoError(t, wh.Verify(req.body, req.header), "signature verifies with the reference library")
			var body struct {
				ID        string          `json:"id"`
				Type      string          `json:"type"`
				Timestamp time.Time       `json:"timestamp"`
				Data      json.RawMessage `json:"data"`
			}
			require.NoError(t, json.Unmarshal(req.body, &body))
			require.Equal(t, body.ID, req.header.Get("webhook-id"))
			require.Equal(t, "application/json", req.header.Get("Content-Type"))
			require.False(t, body.Timestamp.IsZero())
			types = append(types, body.Type)
		}
		require.ElementsMatch(t, wantTypes, types)
	}
	verify(all, allSecret, "proposal.accepted", "conversation.created", "conversation.message.created", "unrelated.thing")
	verify(proposals, proposalsSecret, "proposal.accepted")
	verify(exact, exactSecret, "conversation.created", "conversation.message.created")

	// After a rotation both secrets verify, and the response carries the new one only then.
	r = h.call(http.MethodPost, "/subscriptions/"+exactID+"/rotate-secret", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	rotated := r.json(t)["secret"].(string)
	require.NotEqual(t, exactSecret, rotated)
	h.publish("conversation.created", map[string]any{"conversation_id": "c2"})
	hosttest.Eventually(t, 20*time.Second, func() bool { return exact.count() == 3 }, "rotated subscription receives")
	last := exact.received()[2]
	require.Len(t, strings.Split(last.header.Get("webhook-signature"), " "), 2)
	for _, s := range []string{exactSecret, rotated} {
		wh, _ := standardwebhooks.NewWebhook(s)
		require.NoError(t, wh.Verify(last.body, last.header))
	}

	hosttest.Eventually(t, 30*time.Second, func() bool {
		var n int64
		h.db.Conn(tenantContext()).Model(&Delivery{}).Where("status = ?", StatusSucceeded).Count(&n)
		return n == 9
	}, "all deliveries succeeded")
	require.Equal(t, 5, all.count())
	require.Equal(t, 1, proposals.count())
	require.Equal(t, int64(9), hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_deliveries"))
}

func TestIntegrationEventsBecomeWebhookEventsOnceEvenWhenRedelivered(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{bus: true})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "invoice.*")
	ctx := tenantContext()
	e, err := messaging.NewEvent(ctx, "invoices", "invoice.sent", map[string]any{"proposal_id": "p9"})
	require.NoError(t, err)
	for range 2 { // the broker may deliver an event twice: the second finds its webhook event stored
		require.NoError(t, h.db.WithTx(ctx, func(ctx context.Context) error { return h.svc.events.Publish(ctx, e) }))
	}
	hosttest.Eventually(t, 20*time.Second, func() bool { return rc.count() == 1 }, "one request")
	require.Equal(t, e.ID, rc.received()[0].header.Get("webhook-id"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(rc.received()[0].body, &body))
	require.Equal(t, map[string]any{"proposal_id": "p9"}, body["data"])
	require.Equal(t, e.OccurredAt.UTC().Format(time.RFC3339Nano), body["timestamp"], "the webhook timestamp is the event's")
	hosttest.Eventually(t, 30*time.Second, func() bool { return hosttest.Count(t, h.db, "SELECT count(*) FROM outbox_messages") == 0 }, "outbox drained")
	require.Equal(t, int64(1), hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_events"))
	require.Equal(t, int64(1), hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_deliveries"))
	require.Equal(t, 1, rc.count())
}

func deliveryOf(t *testing.T, h *harness, eventID string) (Delivery, []Attempt) {
	t.Helper()
	var d Delivery
	require.NoError(t, h.db.Conn(tenantContext()).Where("event_id = ?", eventID).Take(&d).Error)
	d2, attempts, err := h.svc.Delivery(tenantContext(), d.ID)
	require.NoError(t, err)
	return d2, attempts
}

func TestAReceiverFailingTwiceThenAnswering200GetsThreeAttemptsAndSuccess(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h.subscribe(rc.URL, "*")
	eventID := h.publish("retry.me", map[string]any{})

	hosttest.Eventually(t, 20*time.Second, func() bool { d, _ := deliveryOf(t, h, eventID); return d.Status == StatusSucceeded }, "delivery succeeded")
	d, attempts := deliveryOf(t, h, eventID)
	require.Equal(t, 3, d.AttemptCount)
	require.Len(t, attempts, 3)
	for i, a := range attempts {
		require.Equal(t, i+1, a.Number)
		require.Equal(t, TriggerScheduled, a.Trigger)
	}
	require.Equal(t, 503, *attempts[0].StatusCode)
	require.Equal(t, errClassHTTPStatus, attempts[0].ErrorClass)
	require.Equal(t, "not yet\n", attempts[0].ResponseExcerpt)
	require.Equal(t, 200, *attempts[2].StatusCode)
	require.Empty(t, attempts[2].ErrorClass)
	ids := map[string]bool{}
	for _, r := range rc.received() {
		ids[r.header.Get("webhook-id")] = true
	}
	require.Equal(t, map[string]bool{eventID: true}, ids, "the same webhook-id on every attempt")

	r := h.call(http.MethodGet, "/deliveries/"+d.ID.String(), nil)
	require.Equal(t, http.StatusOK, r.status)
	body := r.json(t)
	require.Equal(t, "succeeded", body["status"])
	require.Equal(t, 3.0, body["attempt_count"])
	require.Nil(t, body["next_attempt_at"])
	require.Equal(t, `"`+body["version"].(string)+`"`, r.header.Get("ETag"))
	got := body["attempts"].([]any)
	require.Len(t, got, 3)
	first := got[0].(map[string]any)
	for _, k := range []string{"number", "trigger", "started_at", "duration_ms", "status_code", "error", "response_excerpt"} {
		require.Contains(t, first, k)
	}
	require.Equal(t, "scheduled", first["trigger"])
}

func TestAnAlwaysFailingReceiverFailsAfterTheScheduleAndADeliveryFailedEventIsPublished(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true})
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	subID, _ := h.subscribe(rc.URL, "*")
	eventID := h.publish("always.fails", map[string]any{})

	hosttest.Eventually(t, 20*time.Second, func() bool { d, _ := deliveryOf(t, h, eventID); return d.Status == StatusFailed }, "delivery failed")
	d, attempts := deliveryOf(t, h, eventID)
	require.Len(t, attempts, len(testConfig().RetrySchedule)+1)
	require.Equal(t, 3, rc.count())
	require.Equal(t, 500, *d.LastStatusCode)
	hosttest.Eventually(t, 20*time.Second, func() bool { return len(h.failedEvents()) == 1 }, "delivery_failed consumed")
	ev := h.failedEvents()[0]
	require.Equal(t, d.ID, ev.DeliveryID)
	require.Equal(t, uuid.MustParse(subID), ev.SubscriptionID)
	require.Equal(t, 3, ev.AttemptCount)

	// A redelivery of a failed delivery gets a new attempt with trigger redeliver and the same webhook-id.
	rc.respond = nil
	r := h.call(http.MethodPost, "/deliveries/"+d.ID.String()+"/redeliver", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	require.Equal(t, "pending", r.json(t)["status"])
	hosttest.Eventually(t, 20*time.Second, func() bool { d, _ := deliveryOf(t, h, eventID); return d.Status == StatusSucceeded }, "redelivered")
	_, attempts = deliveryOf(t, h, eventID)
	require.Len(t, attempts, 4)
	require.Equal(t, TriggerRedeliver, attempts[3].Trigger)
	require.Equal(t, eventID, rc.received()[3].header.Get("webhook-id"))
}

func TestAReceiverSlowerThanTheTimeoutGetsTimeoutAttemptsAndIsRetried(t *testing.T) {
	cfg := testConfig()
	cfg.SendTimeout = 200 * time.Millisecond
	cfg.ClaimLease = 2 * time.Second
	h := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	release := make(chan struct{})
	// The first two requests outlast the timeout; by number, not by a flag the test flips, so a third
	// attempt due 100 ms after the second cannot find the receiver still slow on a loaded machine.
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			select {
			case <-release:
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	defer close(release)
	h.subscribe(rc.URL, "*")
	eventID := h.publish("slow.receiver", map[string]any{})

	hosttest.Eventually(t, 30*time.Second, func() bool { d, _ := deliveryOf(t, h, eventID); return d.Status != StatusPending }, "delivery finished")
	d, attempts := deliveryOf(t, h, eventID)
	require.Equal(t, StatusSucceeded, d.Status, "the attempt after the receiver sped up succeeds")
	require.Len(t, attempts, 3)
	for _, a := range attempts[:2] {
		require.Equal(t, errClassTimeout, a.ErrorClass)
		require.Nil(t, a.StatusCode)
		require.Less(t, a.DurationMS, 2000)
	}
}

func TestAStaleDeliveryRequestSendsNothing(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{bus: true})
	var sent atomic.Int32
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { sent.Add(1); w.WriteHeader(200) })
	h.subscribe(rc.URL, "*")
	eventID := h.publish("stale.check", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { d, _ := deliveryOf(t, h, eventID); return d.Status == StatusSucceeded }, "delivered")
	d, _ := deliveryOf(t, h, eventID)
	require.Equal(t, 1, rc.count())
	ctx := tenantContext()

	// A duplicate of the original request (its claim is gone) and a request with a made-up claim,
	// both through RabbitMQ and straight into the handler, in the one-delivery form of earlier versions.
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(h.observedRequests(d.ID)) == 1 }, "original request observed")
	stale := append(h.observedRequests(d.ID), contract.DeliveryRequestedPayload{DeliveryID: d.ID, ClaimID: uuid.New()})
	staleBefore := hosttest.Metric(t, h.registry, "keelson_webhooks_stale_requests_total")
	for _, p := range stale {
		e, err := messaging.NewEvent(ctx, contract.Source, contract.DeliveryRequested, p)
		require.NoError(t, err)
		require.NoError(t, h.db.WithTx(ctx, func(ctx context.Context) error { return h.svc.events.Publish(ctx, e) }))
		require.NoError(t, h.svc.handleDeliveryRequested(ctx, e))
	}
	hosttest.Eventually(t, 20*time.Second, func() bool {
		return hosttest.Metric(t, h.registry, "keelson_webhooks_stale_requests_total") == staleBefore+float64(2*len(stale))
	}, "stale requests consumed")
	require.Equal(t, int32(1), sent.Load(), "no HTTP request for a stale claim")
	after, attempts := deliveryOf(t, h, eventID)
	require.Equal(t, d.Version, after.Version, "the delivery was not written")
	require.Len(t, attempts, 1)
}

func TestAnOutcomeLostToARedeliveryDuringTheSendIsDroppedAndTheRedeliveryCounts(t *testing.T) {
	// With the sweep: the send gate puts the redelivery back while the first send hangs on a new endpoint.
	h := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true})
	inFlight := make(chan struct{})
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			close(inFlight)
			<-release
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h.subscribe(rc.URL, "*")
	eventID := h.publish("redelivered.midway", map[string]any{})
	select {
	case <-inFlight:
	case <-time.After(20 * time.Second):
		t.Fatal("first attempt never started")
	}
	d, _ := deliveryOf(t, h, eventID)
	r := h.call(http.MethodPost, "/deliveries/"+d.ID.String()+"/redeliver", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	close(release)

	hosttest.Eventually(t, 20*time.Second, func() bool {
		return hosttest.Metric(t, h.registry, "keelson_webhooks_delivery_outcomes_total", "outcome", "dropped") == 1 &&
			hosttest.Metric(t, h.registry, "keelson_webhooks_delivery_outcomes_total", "outcome", "succeeded") == 1
	}, "first outcome dropped, redelivery succeeded")
	d, attempts := deliveryOf(t, h, eventID)
	require.Equal(t, StatusSucceeded, d.Status)
	require.Len(t, attempts, 2, "both requests sent are recorded")
	require.Equal(t, ResultSuperseded, attempts[0].Result, "the first outcome lost to the redelivery")
	require.Equal(t, 500, *attempts[0].StatusCode)
	require.Equal(t, TriggerRedeliver, attempts[1].Trigger)
	require.Equal(t, ResultSucceeded, attempts[1].Result)
	require.Equal(t, 200, *attempts[1].StatusCode)
	require.Equal(t, 2, d.AttemptCount)
	require.Equal(t, 2, rc.count())
}
