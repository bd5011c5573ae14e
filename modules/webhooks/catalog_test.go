package webhooks

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEventTypesListsTheCatalogPageByPageWithSchemaExampleAndOwner(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	first := h.call(http.MethodGet, "/event-types?limit=1", nil)
	require.Equal(t, http.StatusOK, first.status, string(first.body))
	page := first.json(t)
	items := page["items"].([]any)
	require.Len(t, items, 1)
	item := items[0].(map[string]any)
	require.Equal(t, "invoice.paid", item["type"])
	require.Equal(t, "invoices", item["owner"])
	require.Equal(t, "An invoice was paid.", item["description"])
	require.Equal(t, map[string]any{"invoice_id": "inv_1", "amount": 1200.0}, item["example"])
	schema := item["schema"].(map[string]any)
	require.Equal(t, "object", schema["type"])
	require.Contains(t, schema["properties"], "invoice_id")

	next := h.call(http.MethodGet, "/event-types?limit=1&cursor="+page["next_cursor"].(string), nil)
	require.Equal(t, http.StatusOK, next.status)
	second := next.json(t)
	require.Equal(t, "invoice.sent", second["items"].([]any)[0].(map[string]any)["type"])
	next = h.call(http.MethodGet, "/event-types?limit=10&cursor="+second["next_cursor"].(string), nil)
	last := next.json(t)
	var own []string
	for _, it := range last["items"].([]any) {
		require.Equal(t, "webhooks", it.(map[string]any)["owner"], "the module's own")
		own = append(own, it.(map[string]any)["type"].(string))
	}
	require.Equal(t, []string{"webhook.test", "webhooks.subscription_disabled"}, own)
	require.Nil(t, last["next_cursor"])

	bad := h.call(http.MethodGet, "/event-types?cursor=nope", nil)
	require.Equal(t, http.StatusBadRequest, bad.status)
	require.Equal(t, "invalid_query", bad.json(t)["code"])
}

func TestAClientMayNotPostAnEventOfATypeAModuleOwns(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	for _, typ := range []string{"invoice.sent", "invoice.not_declared_yet", "invoices.archived"} {
		r := h.call(http.MethodPost, "/events", map[string]any{"type": typ, "data": map[string]any{}})
		require.Equal(t, http.StatusUnprocessableEntity, r.status, typ)
		p := r.json(t)
		require.Equal(t, CodeEventTypeReserved, p["code"], typ)
		require.Equal(t, "type", p["errors"].([]any)[0].(map[string]any)["field"])
	}
	var stored int64
	require.NoError(t, h.db.Gorm().Table("webhook_events").Count(&stored).Error)
	require.Zero(t, stored, "a refused event is not stored")
	require.Equal(t, http.StatusAccepted, h.call(http.MethodPost, "/events", map[string]any{"type": "invoicing.sent", "data": map[string]any{}}).status,
		"a type outside every module's namespace is the client's own")
}

func TestASubscriptionWhosePatternsMatchNoKnownTypeIsCreatedWithAWarning(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	r := h.call(http.MethodPost, "/subscriptions", map[string]any{"url": "http://127.0.0.1:9/hook", "event_types": []string{"invoice.*", "order.created"}})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	created := r.json(t)
	warnings := created["warnings"].([]any)
	require.Len(t, warnings, 1)
	require.Contains(t, warnings[0], `"order.created" matches no event type a module publishes`)

	r = h.call(http.MethodPatch, "/subscriptions/"+created["id"].(string), map[string]any{"event_types": []string{"invoice.paid", "*"}},
		"If-Match", r.header.Get("ETag"))
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.NotContains(t, r.json(t), "warnings", "every pattern matches a known type")

	r = h.call(http.MethodPost, "/subscriptions", map[string]any{"url": "http://127.0.0.1:9/hook", "event_types": []string{"*"}})
	require.Equal(t, http.StatusCreated, r.status)
	require.NotContains(t, r.json(t), "warnings")
}
