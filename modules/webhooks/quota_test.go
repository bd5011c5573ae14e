package webhooks

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/apperr"
)

func TestTwentyConcurrentCreatesOnTwoReplicasNeverExceedTheSubscriptionQuota(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSubscriptionsPerTenant = 5
	a := newHarness(t, cfg, harnessOptions{})
	b := newHarness(t, cfg, harnessOptions{database: a.database})
	a.subscribe("http://127.0.0.1:9/first", "*")

	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		created, refused int
		unexpected       []error
	)
	start := make(chan struct{})
	for i := range 20 {
		replica := []*harness{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, _, err := replica.svc.CreateSubscription(tenantContext(), SubscriptionInput{URL: "http://127.0.0.1:9/hook", EventTypes: []string{"*"}})
			var conflict *apperr.StateConflictError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.As(err, &conflict) && conflict.Code == CodeSubscriptionQuota:
				refused++
			default:
				unexpected = append(unexpected, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, unexpected)
	require.Equal(t, 4, created, "the quota's last four places")
	require.Equal(t, 16, refused)
	require.Equal(t, int64(5), a.count(`SELECT count(*) FROM webhook_subscriptions WHERE deleted_at IS NULL`))
	require.Equal(t, int64(5), a.count(`SELECT count(*) FROM webhook_subscription_health`), "a refused create leaves nothing behind")

	r := a.call(http.MethodPost, "/subscriptions", map[string]any{"url": "http://127.0.0.1:9/over", "event_types": []string{"*"}})
	require.Equal(t, http.StatusConflict, r.status, string(r.body))
	require.Equal(t, CodeSubscriptionQuota, r.json(t)["code"])
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))

	var id string
	require.NoError(t, a.db.Gorm().Raw(`SELECT id::text FROM webhook_subscriptions WHERE deleted_at IS NULL LIMIT 1`).Row().Scan(&id))
	require.Equal(t, http.StatusNoContent, a.call(http.MethodDelete, "/subscriptions/"+id, nil).status)
	a.subscribe("http://127.0.0.1:9/again", "*") // a deleted one frees its place
}

func TestEventDataBeyondThePayloadSizeLimitGets413AndWritesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.MaxEventBytes = 1024
	h := newHarness(t, cfg, harnessOptions{})
	h.subscribe("http://127.0.0.1:9/hook", "*")
	big := `{"type":"order.created","data":{"blob":"` + strings.Repeat("x", 1100) + `"}}`
	r := h.call(http.MethodPost, "/events", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, string(r.body))
	require.Equal(t, "payload_too_large", r.json(t)["code"])
	require.Contains(t, r.json(t)["detail"], "at most 1024")
	require.Zero(t, h.count(`SELECT count(*) FROM webhook_events`))
	require.Zero(t, h.count(`SELECT count(*) FROM outbox_messages`))

	fits := `{"type":"order.created","data":{"blob":"` + strings.Repeat("x", 1000) + `"}}`
	require.Equal(t, http.StatusAccepted, h.call(http.MethodPost, "/events", fits).status)
}

// count runs a SELECT count(*) on the test's database.
func (h *harness) count(query string) int64 {
	h.t.Helper()
	var n int64
	require.NoError(h.t, h.db.Gorm().Raw(query).Row().Scan(&n))
	return n
}
