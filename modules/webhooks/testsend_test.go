package webhooks

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestATestSendReachesThatSubscriptionAloneSignedAndAnswers202WithItsDelivery(t *testing.T) {
	a := newHarness(t, testConfig(), harnessOptions{bus: true})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database, bus: true})
	target := newReceiver(t, nil)
	other := newReceiver(t, nil)
	id, secret := a.subscribe(target.URL, "orders.created")
	a.subscribe(other.URL, "*")

	r := b.call(http.MethodPost, "/subscriptions/"+id+"/test", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	d := r.json(t)
	require.Equal(t, "webhook.test", d["event_type"])
	require.Equal(t, id, d["subscription_id"])
	require.Equal(t, "pending", d["status"])
	require.Equal(t, "/api/v1/webhooks/deliveries/"+d["id"].(string), r.header.Get("Location"))

	hosttest.Eventually(t, 20*time.Second, func() bool {
		got := a.call(http.MethodGet, "/deliveries/"+d["id"].(string), nil).json(t)
		return got["status"] == "succeeded"
	}, "the test delivery succeeded")
	require.Equal(t, 1, target.count())
	req := target.received()[0]
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(req.body, req.header))
	var body struct {
		Type string `json:"type"`
		Data struct {
			SubscriptionID string `json:"subscription_id"`
			Message        string `json:"message"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(req.body, &body))
	require.Equal(t, "webhook.test", body.Type)
	require.Equal(t, id, body.Data.SubscriptionID)
	require.NotEmpty(t, body.Data.Message)
	require.Zero(t, other.count(), "sent to that subscription alone")
	require.Equal(t, int64(1), hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_deliveries"))

	before := hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_events")
	require.Equal(t, http.StatusNotFound, a.call(http.MethodPost, "/subscriptions/"+uuid.NewString()+"/test", nil).status)
	r = a.call(http.MethodPost, "/subscriptions/"+id+"/test", map[string]any{"type": "x.y"})
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
	require.Equal(t, before, hosttest.Count(t, a.db, "SELECT count(*) FROM webhook_events"), "nothing written")
}

func TestATestSendAnswersTheVersionItsDeliveryWasStoredWith(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{}) // no bus: nothing takes the delivery, so its row stays as stored
	id, _ := h.subscribe("http://127.0.0.1:9/", "orders.created")

	r := h.call(http.MethodPost, "/subscriptions/"+id+"/test", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	sent := r.json(t)
	got := h.call(http.MethodGet, "/deliveries/"+sent["id"].(string), nil)
	require.Equal(t, http.StatusOK, got.status, string(got.body))
	require.Equal(t, got.json(t)["version"], sent["version"])
	require.Equal(t, got.header.Get("ETag"), r.header.Get("ETag"), "the ETag a client sends back in If-Match")
}
