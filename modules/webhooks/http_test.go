package webhooks

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestSubscriptionsCarryAVersionCheckedByIfMatchAndNeverShowTheSecretAgain(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	r := h.call(http.MethodPost, "/subscriptions", map[string]any{
		"url": "https://example.com/hook", "event_types": []string{"proposal.*"}, "description": "mine"})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	created := r.json(t)
	id := created["id"].(string)
	require.True(t, strings.HasPrefix(created["secret"].(string), "whsec_"))
	require.Equal(t, "/api/v1/webhooks/subscriptions/"+id, r.header.Get("Location"))
	require.Equal(t, `"`+created["version"].(string)+`"`, r.header.Get("ETag"))
	require.Equal(t, true, created["enabled"])

	r = h.call(http.MethodGet, "/subscriptions/"+id, nil)
	require.Equal(t, http.StatusOK, r.status)
	require.NotContains(t, r.json(t), "secret")
	etag := r.header.Get("ETag")
	require.Equal(t, `"`+created["version"].(string)+`"`, etag)

	r = h.call(http.MethodGet, "/subscriptions", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.NotContains(t, string(r.body), "whsec_")

	r = h.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"enabled": false, "event_types": []string{"*"}}, "If-Match", etag)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	patched := r.json(t)
	require.Equal(t, false, patched["enabled"])
	require.Equal(t, []any{"*"}, patched["event_types"])
	require.Equal(t, "mine", patched["description"])
	require.NotEqual(t, created["version"], patched["version"])
	require.NotContains(t, patched, "secret")

	r = h.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"enabled": true}, "If-Match", etag)
	require.Equal(t, http.StatusPreconditionFailed, r.status)
	require.Equal(t, "precondition_failed", r.json(t)["code"])
	r = h.call(http.MethodDelete, "/subscriptions/"+id, nil, "If-Match", etag)
	require.Equal(t, http.StatusPreconditionFailed, r.status)

	r = h.call(http.MethodPost, "/subscriptions", map[string]any{
		"url": "https://example.com/other", "event_types": []string{"a.b"}, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "enabled": false})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	require.Equal(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", r.json(t)["secret"])

	r = h.call(http.MethodDelete, "/subscriptions/"+id, nil, "If-Match", `"`+patched["version"].(string)+`"`)
	require.Equal(t, http.StatusNoContent, r.status)
	require.Equal(t, http.StatusNotFound, h.call(http.MethodGet, "/subscriptions/"+id, nil).status)
	require.Equal(t, http.StatusNotFound, h.call(http.MethodDelete, "/subscriptions/"+id, nil).status)
	list := h.call(http.MethodGet, "/subscriptions", nil).json(t)
	require.Len(t, list["items"], 1)
}

func TestDeletedAndDisabledSubscriptionsAreSentNothing(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{bus: true})
	rc := newReceiver(t, nil)
	disabledID, _ := h.subscribe(rc.URL+"/disabled", "*")
	deletedID, _ := h.subscribe(rc.URL+"/deleted", "*")
	require.Equal(t, http.StatusOK, h.call(http.MethodPatch, "/subscriptions/"+disabledID, map[string]any{"enabled": false}).status)

	// A delivery made while the subscription was live, whose subscription is deleted before it is sent:
	// the delete cancels it in its own transaction, so its request finds nothing to send.
	ctx := tenantContext()
	require.NoError(t, h.db.Gorm().Exec(`UPDATE webhook_subscriptions SET status = 'paused' WHERE id = ?`, deletedID).Error)
	res, err := h.svc.ingest(ctx, EventInput{ID: "evt_before_delete", Type: "x.y", Data: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, 1, res.Deliveries, "a paused subscription still gets deliveries")
	require.Equal(t, http.StatusNoContent, h.call(http.MethodDelete, "/subscriptions/"+deletedID, nil).status)
	d, _ := deliveryOf(t, h, "evt_before_delete")
	require.Equal(t, StatusFailed, d.Status)
	require.Equal(t, "cancelled: subscription deleted", d.LastError)
	r := h.call(http.MethodPost, "/deliveries/"+d.ID.String()+"/redeliver", nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.body))
	hosttest.Eventually(t, 20*time.Second, func() bool {
		return hosttest.Metric(t, h.registry, "keelson_webhooks_stale_requests_total") >= 1
	}, "the fan-out's request found nothing to send")
	require.Zero(t, rc.count(), "nothing sent to a deleted subscription")

	r = h.call(http.MethodPost, "/events", map[string]any{"type": "x.y", "data": map[string]any{}})
	require.Equal(t, http.StatusAccepted, r.status)
	require.Equal(t, 0.0, r.json(t)["deliveries"], "no delivery for disabled or deleted subscriptions")
}

func TestSsrfLiteralPrivateUrlsAreRefusedUnlessAllowedAndNamesResolvingToLoopbackAreBlockedAtSendTime(t *testing.T) {
	cfg := testConfig()
	cfg.AllowPrivateTargets = false
	h := newHarness(t, cfg, harnessOptions{bus: true})
	rc := newReceiver(t, nil)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]

	for _, u := range []string{rc.URL, "http://10.1.2.3/", "http://192.168.0.10/x", "http://169.254.169.254/latest/meta-data",
		"http://[::1]:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/", "http://100.64.0.1/", "http://[fd00::1]/", "http://0.0.0.0:" + port} {
		r := h.call(http.MethodPost, "/subscriptions", map[string]any{"url": u, "event_types": []string{"*"}})
		require.Equal(t, http.StatusUnprocessableEntity, r.status, u)
		require.Equal(t, "url", r.json(t)["errors"].([]any)[0].(map[string]any)["field"])
	}
	require.Zero(t, hosttest.Count(t, h.db, "SELECT count(*) FROM webhook_subscriptions"))

	h.subscribe("http://localhost:"+port+"/hook", "*")
	eventID := h.publish("ssrf.check", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { _, a := deliveryOf(t, h, eventID); return finished(a) == 1 }, "attempt recorded")
	_, attempts := deliveryOf(t, h, eventID)
	require.Equal(t, errClassSSRFBlocked, attempts[0].ErrorClass)
	require.Nil(t, attempts[0].StatusCode, "no status code: nothing was connected")
	require.Zero(t, rc.count())

	allowed := newHarness(t, testConfig(), harnessOptions{})
	allowed.subscribe(rc.URL, "*")
}

func TestARedirectIsNotFollowedAndFailsTheAttempt(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{bus: true})
	target := newReceiver(t, nil)
	redirector := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	})
	h.subscribe(redirector.URL, "*")
	eventID := h.publish("redirect.check", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { _, a := deliveryOf(t, h, eventID); return finished(a) == 1 }, "attempt recorded")
	d, attempts := deliveryOf(t, h, eventID)
	require.Equal(t, http.StatusTemporaryRedirect, *attempts[0].StatusCode)
	require.Equal(t, errClassHTTPStatus, attempts[0].ErrorClass)
	require.Equal(t, StatusPending, d.Status, "a redirect is a failure to retry")
	require.Zero(t, target.count())
}

func TestBadInputGetsAProblemAndWritesNothing(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	subID, _ := h.subscribe(rc.URL, "*")
	eventID := h.publish("seed.event", map[string]any{})
	d, _ := deliveryOf(t, h, eventID)
	tables := []string{"webhook_subscriptions", "webhook_events", "webhook_deliveries", "webhook_attempts", "outbox_messages"}
	before := map[string]int64{}
	for _, tb := range tables {
		before[tb] = hosttest.Count(t, h.db, "SELECT count(*) FROM "+tb)
	}
	subBefore := h.call(http.MethodGet, "/subscriptions/"+subID, nil).json(t)

	valid := func(extra map[string]any) map[string]any {
		m := map[string]any{"url": "https://example.com/h", "event_types": []string{"*"}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
		header             []string
	}{
		{"ftp scheme", "POST", "/subscriptions", valid(map[string]any{"url": "ftp://example.com/x"}), 422, "validation_failed", nil},
		{"not a url", "POST", "/subscriptions", valid(map[string]any{"url": "not a url"}), 422, "validation_failed", nil},
		{"no url", "POST", "/subscriptions", map[string]any{"event_types": []string{"*"}}, 422, "validation_failed", nil},
		{"userinfo", "POST", "/subscriptions", valid(map[string]any{"url": "https://u:p@example.com/"}), 422, "validation_failed", nil},
		{"long url", "POST", "/subscriptions", valid(map[string]any{"url": "https://example.com/" + strings.Repeat("a", 2100)}), 422, "validation_failed", nil},
		{"empty patterns", "POST", "/subscriptions", valid(map[string]any{"event_types": []string{}}), 422, "validation_failed", nil},
		{"missing patterns", "POST", "/subscriptions", map[string]any{"url": "https://example.com/h"}, 422, "validation_failed", nil},
		{"malformed pattern", "POST", "/subscriptions", valid(map[string]any{"event_types": []string{"a..b"}}), 422, "validation_failed", nil},
		{"inner wildcard", "POST", "/subscriptions", valid(map[string]any{"event_types": []string{"a.*.b"}}), 422, "validation_failed", nil},
		{"empty pattern", "POST", "/subscriptions", valid(map[string]any{"event_types": []string{""}}), 422, "validation_failed", nil},
		{"patterns not an array", "POST", "/subscriptions", valid(map[string]any{"event_types": "*"}), 422, "validation_failed", nil},
		{"bad secret", "POST", "/subscriptions", valid(map[string]any{"secret": "whsec_short"}), 422, "validation_failed", nil},
		{"unknown field", "POST", "/subscriptions", valid(map[string]any{"colour": "red"}), 422, "validation_failed", nil},
		{"malformed json", "POST", "/subscriptions", `{"url":`, 400, "malformed_json", nil},
		{"oversize body", "POST", "/subscriptions", `{"url":"` + strings.Repeat("a", 2<<20) + `"}`, 413, "payload_too_large", nil},
		{"not json", "POST", "/subscriptions", valid(nil), 415, "unsupported_media_type", []string{"Content-Type", "text/plain"}},
		{"bad uuid get", "GET", "/subscriptions/not-a-uuid", nil, 404, "not_found", nil},
		{"bad uuid patch", "PATCH", "/subscriptions/123", map[string]any{"enabled": false}, 404, "not_found", nil},
		{"unknown subscription", "PATCH", "/subscriptions/0190a0a0-0000-7000-8000-000000000000", map[string]any{"enabled": false}, 404, "not_found", nil},
		{"patch bad url", "PATCH", "/subscriptions/" + subID, map[string]any{"url": "gopher://x"}, 422, "validation_failed", nil},
		{"patch empty patterns", "PATCH", "/subscriptions/" + subID, map[string]any{"event_types": []string{}}, 422, "validation_failed", nil},
		{"patch unknown field", "PATCH", "/subscriptions/" + subID, map[string]any{"secret": "whsec_x"}, 422, "validation_failed", nil},
		{"patch stale If-Match", "PATCH", "/subscriptions/" + subID, map[string]any{"enabled": false}, 412, "precondition_failed", []string{"If-Match", `"1"`}},
		{"rotate bad uuid", "POST", "/subscriptions/xyz/rotate-secret", nil, 404, "not_found", nil},
		{"rotate with body", "POST", "/subscriptions/" + subID + "/rotate-secret", map[string]any{"x": 1}, 422, "validation_failed", nil},
		{"event data array", "POST", "/events", map[string]any{"type": "a.b", "data": []int{1}}, 422, "validation_failed", nil},
		{"event no data", "POST", "/events", map[string]any{"type": "a.b"}, 422, "validation_failed", nil},
		{"event empty type", "POST", "/events", map[string]any{"type": "", "data": map[string]any{}}, 422, "validation_failed", nil},
		{"event wildcard type", "POST", "/events", map[string]any{"type": "a.*", "data": map[string]any{}}, 422, "validation_failed", nil},
		{"event bad id", "POST", "/events", map[string]any{"id": "no spaces!", "type": "a.b", "data": map[string]any{}}, 422, "validation_failed", nil},
		{"event unknown field", "POST", "/events", map[string]any{"type": "a.b", "data": map[string]any{}, "extra": 1}, 422, "validation_failed", nil},
		{"event oversize", "POST", "/events", `{"type":"a.b","data":{"x":"` + strings.Repeat("a", 2<<20) + `"}}`, 413, "payload_too_large", nil},
		{"deliveries bad status", "GET", "/deliveries?status=done", nil, 400, "invalid_query", nil},
		{"deliveries bad subscription", "GET", "/deliveries?subscription_id=abc", nil, 400, "invalid_query", nil},
		{"deliveries bad type", "GET", "/deliveries?event_type=a..b", nil, 400, "invalid_query", nil},
		{"deliveries bad limit", "GET", "/deliveries?limit=0", nil, 400, "invalid_query", nil},
		{"deliveries bad cursor", "GET", "/deliveries?cursor=!!!", nil, 400, "invalid_query", nil},
		{"delivery bad uuid", "GET", "/deliveries/nope", nil, 404, "not_found", nil},
		{"redeliver bad uuid", "POST", "/deliveries/nope/redeliver", nil, 404, "not_found", nil},
		{"redeliver unknown", "POST", "/deliveries/0190a0a0-0000-7000-8000-000000000000/redeliver", nil, 404, "not_found", nil},
		{"redeliver stale If-Match", "POST", "/deliveries/" + d.ID.String() + "/redeliver", nil, 412, "precondition_failed", []string{"If-Match", `"1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.call(tc.method, tc.path, tc.body, tc.header...)
			require.Equal(t, tc.status, r.status, string(r.body))
			require.Equal(t, "application/problem+json", strings.Split(r.header.Get("Content-Type"), ";")[0])
			require.Equal(t, tc.code, r.json(t)["code"])
		})
	}
	for _, tb := range tables {
		require.Equal(t, before[tb], hosttest.Count(t, h.db, "SELECT count(*) FROM "+tb), "rows of %s", tb)
	}
	require.Equal(t, subBefore, h.call(http.MethodGet, "/subscriptions/"+subID, nil).json(t))
}

func TestDeliveriesAreListedNewestFirstWithFiltersAndCursorPagination(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	aID, _ := h.subscribe(rc.URL+"/a", "*")
	h.subscribe(rc.URL+"/b", "orders.*")
	for i := range 5 {
		h.publish("orders.created", map[string]any{"i": i})
	}
	h.publish("users.created", map[string]any{})

	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		r := h.call(http.MethodGet, "/deliveries?limit=4"+cursor, nil)
		require.Equal(t, http.StatusOK, r.status, string(r.body))
		body := r.json(t)
		for _, it := range body["items"].([]any) {
			ids = append(ids, it.(map[string]any)["id"].(string))
		}
		if body["next_cursor"] == nil {
			break
		}
		cursor = "&cursor=" + body["next_cursor"].(string)
		require.Less(t, page, 5)
	}
	require.Len(t, ids, 11)
	for i := 1; i < len(ids); i++ {
		require.Greater(t, ids[i-1], ids[i], "newest first")
	}

	count := func(query string) int {
		r := h.call(http.MethodGet, "/deliveries?"+query, nil)
		require.Equal(t, http.StatusOK, r.status, string(r.body))
		return len(r.json(t)["items"].([]any))
	}
	require.Equal(t, 6, count("subscription_id="+aID))
	require.Equal(t, 10, count("event_type=orders.created"))
	require.Equal(t, 1, count("event_type=users.created"))
	require.Equal(t, 11, count("status=pending"))
	require.Equal(t, 0, count("status=succeeded"))
	require.Equal(t, 5, count(fmt.Sprintf("subscription_id=%s&event_type=orders.created", aID)))

	item := h.call(http.MethodGet, "/deliveries?limit=1", nil).json(t)["items"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "subscription_id", "event_id", "event_type", "status", "attempt_count", "next_attempt_at",
		"last_status_code", "last_error", "created_at", "updated_at", "version"} {
		require.Contains(t, item, k)
	}
}

func TestADeliveryReadAloneShowsTheBodyItsAttemptsSend(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL+"/a", "orders.*")
	eventID := h.publish("orders.created", map[string]any{"note": "<script>x</script>"})

	list := h.call(http.MethodGet, "/deliveries", nil).json(t)["items"].([]any)
	require.Len(t, list, 1)
	item := list[0].(map[string]any)
	require.NotContains(t, item, "payload", "lists stay small")

	detail := h.call(http.MethodGet, "/deliveries/"+item["id"].(string), nil).json(t)
	payload := detail["payload"].(map[string]any)
	require.Equal(t, eventID, payload["id"])
	require.Equal(t, "orders.created", payload["type"])
	require.Contains(t, payload, "timestamp")
	require.Equal(t, map[string]any{"note": "<script>x</script>"}, payload["data"])
}
