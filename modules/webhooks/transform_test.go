package webhooks

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestATransformedSubscriptionIsSentTheBodyItsExpressionProducesSignedOnTwoReplicas(t *testing.T) {
	cfg := testConfig()
	cfg.RetrySchedule = []time.Duration{time.Hour}
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	b := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true})
	shaped, plain := newReceiver(t, nil), newReceiver(t, nil)
	transform := `{"kind": type, "event": id, "total": data.amount, "customer": {"name": data.customer.name}, "at": timestamp, "lines": size(data.items)}`
	r := a.call(http.MethodPost, "/subscriptions", map[string]any{"url": shaped.URL, "event_types": []string{"order.*"}, "transform": transform})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	id, secret := r.json(t)["id"].(string), r.json(t)["secret"].(string)
	require.Equal(t, transform, b.statusOf(id)["transform"], "shown by the other replica")
	b.subscribe(plain.URL, "order.*")

	data := map[string]any{"amount": 99.5, "currency": "EUR", "secret_note": "internal", "customer": map[string]any{"name": "Ada", "vat": "DE1"},
		"items": []any{map[string]any{"sku": "a"}, map[string]any{"sku": "b"}}}
	var events []string
	for i := range 4 {
		events = append(events, []*harness{a, b}[i%2].publish("order.created", data))
	}
	hosttest.Eventually(t, 20*time.Second, func() bool { return shaped.count() == 4 && plain.count() == 4 }, "every event at both")
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	for _, req := range shaped.received() {
		require.NoError(t, wh.Verify(req.body, req.header), "the transformed body is the one signed")
		var got map[string]any
		require.NoError(t, json.Unmarshal(req.body, &got))
		require.Equal(t, req.header.Get("webhook-id"), got["event"])
		require.Contains(t, events, got["event"])
		at, err := time.Parse(time.RFC3339Nano, got["at"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), at, time.Minute)
		delete(got, "event")
		delete(got, "at")
		require.Equal(t, map[string]any{"kind": "order.created", "total": 99.5, "customer": map[string]any{"name": "Ada"}, "lines": 2.0}, got,
			"renamed, reshaped, and the fields it left out are not sent")
		require.NotContains(t, string(req.body), "internal")
	}
	for _, req := range plain.received() {
		require.Contains(t, string(req.body), `"secret_note":"internal"`, "other subscriptions get the event as it is")
	}
	d, _ := deliveryOf(t, a, events[0])
	detail := a.call(http.MethodGet, "/deliveries/"+d.ID.String(), nil)
	require.Equal(t, http.StatusOK, detail.status, string(detail.body))
	require.Equal(t, "Ada", detail.json(t)["payload"].(map[string]any)["customer"].(map[string]any)["name"], "the detail shows the body sent")

	// An event the transformation fails on fails its attempt, saying why; "" sends the event's body again.
	failing := b.publish("order.created", map[string]any{"amount": 1})
	hosttest.Eventually(t, 20*time.Second, func() bool { d, _ := deliveryOf(t, a, failing); return d.AttemptCount == 1 && d.ClaimID == nil },
		"the failing transformation's attempt")
	_, attempts := deliveryOf(t, a, failing)
	require.Equal(t, errClassRequest, attempts[0].ErrorClass)
	require.Contains(t, attempts[0].Error, "transform: no such key: customer")
	r = b.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"transform": ""})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	a.publish("order.created", data)
	hosttest.Eventually(t, 20*time.Second, func() bool { return shaped.count() == 5 }, "the untransformed event")
	require.Contains(t, string(shaped.received()[4].body), `"secret_note":"internal"`)
}

func TestABadTransformGets422NamingTheFieldAndTheErrorsPositionAndChangesNothing(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	id, _ := h.subscribe("https://example.com/h", "*")
	before := h.statusOf(id)
	for _, c := range []struct{ transform, want string }{
		{`{"a": data.x`, "line 1, column 13"},
		{`{"a":` + "\n" + ` dta.x}`, "line 2, column 2: undeclared reference to 'dta'"},
		{`data.amount > 1`, "must produce a map"},
		{`[data]`, "must produce a map"},
		{`{1: data}`, "must produce a map"},
		{`{"at": timestamp("never")}`, "must not fail on its constant arguments"},
		{strings.Repeat(`{"a":`, 1000), "must be at most 4096 bytes"},
	} {
		for _, write := range []struct{ method, path string }{{http.MethodPost, "/subscriptions"}, {http.MethodPatch, "/subscriptions/" + id}} {
			r := h.call(write.method, write.path, map[string]any{"url": "https://example.com/h", "event_types": []string{"*"}, "transform": c.transform})
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s %q: %s", write.method, c.transform, r.body)
			errs := r.json(t)["errors"].([]any)
			require.Equal(t, "transform", errs[0].(map[string]any)["field"])
			require.Contains(t, errs[0].(map[string]any)["message"], c.want)
		}
	}
	require.Equal(t, before, h.statusOf(id))
	require.Equal(t, int64(1), h.count(`SELECT count(*) FROM webhook_subscriptions`))
}

func TestATransformationThatWouldRunLongOrGrowTheBodyFailsWithinItsBounds(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	items := make([]any, 300)
	for i := range items {
		items[i] = float64(i)
	}
	raw, err := json.Marshal(map[string]any{"items": items, "blob": strings.Repeat("x", 200<<10)})
	require.NoError(t, err)
	ev := &eventRecord{ID: "e", Type: "t", Data: raw, CreatedAt: time.Now()}
	started := time.Now()
	_, err = h.svc.transformed(`{"n": data.items.map(x, data.items.map(y, x * y))}`, ev)
	require.ErrorContains(t, err, "cost limit")
	_, err = h.svc.transformed(`{"a": [data, data, data, data, data, data]}`, ev)
	require.ErrorContains(t, err, "more than 1048576")
	require.Less(t, time.Since(started), 5*time.Second)
}
