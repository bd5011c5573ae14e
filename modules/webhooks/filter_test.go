package webhooks

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestAFilteredSubscriptionGetsOnlyTheEventsItsFilterAcceptsOnTwoReplicas(t *testing.T) {
	a := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database, bus: true, jobs: true})
	filtered, all := newReceiver(t, nil), newReceiver(t, nil)
	r := a.call(http.MethodPost, "/subscriptions", map[string]any{"url": filtered.URL, "event_types": []string{"order.*"},
		"filter": `data.amount > 100 && data.currency == "EUR"`})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	filteredID := r.json(t)["id"].(string)
	require.Equal(t, `data.amount > 100 && data.currency == "EUR"`, b.statusOf(filteredID)["filter"], "shown by the other replica")
	allID, _ := b.subscribe(all.URL, "order.*")
	require.Empty(t, a.statusOf(allID)["filter"])

	// Published through both replicas: only the first event passes the filter; the others are below
	// the amount, in another currency, lack the field or hold it as a string.
	events := []map[string]any{
		{"amount": 150, "currency": "EUR", "n": 0},
		{"amount": 50, "currency": "EUR", "n": 1},
		{"amount": 150.5, "currency": "USD", "n": 2},
		{"currency": "EUR", "n": 3},
		{"amount": "150", "currency": "EUR", "n": 4},
	}
	for i, data := range events {
		h := []*harness{a, b}[i%2]
		r := h.call(http.MethodPost, "/events", map[string]any{"type": "order.created", "data": data})
		require.Equal(t, http.StatusAccepted, r.status, string(r.body))
		want := 1.0
		if i == 0 {
			want = 2
		}
		require.Equal(t, want, r.json(t)["deliveries"], "event %d: deliveries made", i)
	}
	hosttest.Eventually(t, 20*time.Second, func() bool { return all.count() == len(events) }, "every event at the unfiltered endpoint")
	hosttest.Eventually(t, 20*time.Second, func() bool { return filtered.count() == 1 }, "the accepted event at the filtered one")
	var got map[string]any
	require.NoError(t, json.Unmarshal(filtered.received()[0].body, &got))
	require.Equal(t, 0.0, got["data"].(map[string]any)["n"])
	require.Equal(t, int64(1), a.count(`SELECT count(*) FROM webhook_deliveries WHERE subscription_id = '`+filteredID+`'`),
		"filtered-out events leave no delivery row")

	// A changed filter holds on both replicas from the next event on; "" removes it.
	r = b.call(http.MethodPatch, "/subscriptions/"+filteredID, map[string]any{"filter": `type == "order.paid" || has(data.vip)`})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	a.publish("order.created", map[string]any{"amount": 1000, "currency": "EUR"})
	b.publish("order.created", map[string]any{"vip": true})
	a.publish("order.paid", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { return all.count() == len(events)+3 && filtered.count() == 3 }, "the new filter's events")
	r = a.call(http.MethodPatch, "/subscriptions/"+filteredID, map[string]any{"filter": ""})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Empty(t, r.json(t)["filter"])
	b.publish("order.created", map[string]any{"amount": 1})
	hosttest.Eventually(t, 20*time.Second, func() bool { return filtered.count() == 4 }, "no filter: every event")
	require.Equal(t, 4, filtered.count())
}

func TestABadFilterGets422NamingTheFieldAndTheErrorsPositionAndChangesNothing(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	id, _ := h.subscribe("https://example.com/h", "*")
	before := h.statusOf(id)
	for _, c := range []struct{ filter, want string }{
		{`data.amount >`, "line 1, column 14"},
		{`data.amount > 100 &&` + "\n" + `  amout == 1`, "line 2, column 3: undeclared reference to 'amout'"},
		{`data.amount + 1`, "must produce a bool"},
		{`"EUR"`, "must produce a bool"},
		{`size(data) > 1 ? 1 : "x"`, "line 1"},
		{"   ", "must not be blank"},
		{strings.Repeat("true && ", 600) + "true", "must be at most 4096 bytes"},
		{strings.Repeat("(", 200) + "true" + strings.Repeat(")", 200), "recursion limit exceeded"},
	} {
		for _, write := range []struct{ method, path string }{{http.MethodPost, "/subscriptions"}, {http.MethodPatch, "/subscriptions/" + id}} {
			r := h.call(write.method, write.path, map[string]any{"url": "https://example.com/h", "event_types": []string{"*"}, "filter": c.filter})
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s %q: %s", write.method, c.filter, r.body)
			require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
			errs := r.json(t)["errors"].([]any)
			require.Len(t, errs, 1, string(r.body))
			require.Equal(t, "filter", errs[0].(map[string]any)["field"])
			require.Contains(t, errs[0].(map[string]any)["message"], c.want)
		}
	}
	require.Equal(t, before, h.statusOf(id), "a refused patch changes nothing")
	require.Equal(t, int64(1), h.count(`SELECT count(*) FROM webhook_subscriptions`), "a refused create stores nothing")
}

func TestAFilterThatWouldRunLongIsStoppedAtItsCostLimitAndDeliversNothing(t *testing.T) {
	prg, err := compileExpression(`data.items.all(x, data.items.all(y, data.items.all(z, x + y + z >= 0)))`, filterExpression)
	require.NoError(t, err)
	items := make([]any, 200)
	for i := range items {
		items[i] = float64(i)
	}
	in := expressionInput{"id": "e", "type": "t", "timestamp": time.Now(), "data": map[string]any{"items": items}}
	started := time.Now()
	ok, err := filterMatches(prg, in)
	require.ErrorContains(t, err, "cost limit")
	require.False(t, ok)
	require.Less(t, time.Since(started), time.Second, "stopped at the limit, not after 8 million steps")
}

func TestTheProgramCacheKeepsOneProgramPerExpressionAndAtMostItsSize(t *testing.T) {
	p := newPrograms(filterExpression, 2)
	first, err := p.of(`type == "a"`)
	require.NoError(t, err)
	again, err := p.of(`type == "a"`)
	require.NoError(t, err)
	require.Same(t, first, again, "compiled once")
	_, err = p.of(`type ==`)
	require.Error(t, err, "a compile error is answered too")
	_, _ = p.of(`type == "c"`)
	require.Equal(t, 2, p.len())
}

// BenchmarkFilteringAnEventForTenEndpoints is the fan-out's added work per event when each of ten
// matching subscriptions has a filter: the data decoded once, then ten evaluations.
func BenchmarkFilteringAnEventForTenEndpoints(b *testing.B) {
	p := newPrograms(filterExpression, expressionCacheSize)
	data := json.RawMessage(`{"amount":150,"currency":"EUR","customer":{"tier":"gold","country":"DE"},"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}`)
	filters := []string{`data.amount > 100 && data.currency == "EUR"`, `data.customer.tier in ["gold", "platinum"]`,
		`type.startsWith("order.") && data.items.exists(i, i.qty > 1)`, `has(data.refund) || data.amount >= 150.0`}
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		in, err := newExpressionInput("evt_1", "order.created", at, data)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 10 {
			prg, err := p.of(filters[i%len(filters)])
			if err != nil {
				b.Fatal(err)
			}
			if ok, err := filterMatches(prg, in); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	}
}
