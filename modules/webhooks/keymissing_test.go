package webhooks

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestAReplicaLackingTheKeyGivesADeliveryBackUncountedInsteadOfFailingIt(t *testing.T) {
	d := dbtest.Create(t, migrations.Sets(Name)...)
	// Replica a holds k1 and seals with it; replica b holds only k2 and is the one that delivers.
	a := newHarness(t, testConfig(), harnessOptions{database: d, secrets: testBox(t, testKey1)})
	b := newHarness(t, testConfig(), harnessOptions{database: d, bus: true, jobs: true, secrets: testBox(t, testKey2)})
	rc := newReceiver(t, nil)
	id := a.subscribeWithHeader(rc.URL + "/hook")
	b.publish("order.created", map[string]any{"n": 1})

	hosttest.Eventually(t, 20*time.Second, func() bool {
		return hosttest.Metric(t, b.registry, "keelson_webhooks_put_back_total", "reason", "key_missing") >= 1
	}, "replica b gave the delivery back")
	due := time.Now().Add(keyMissingBackoff / 2)
	hosttest.Eventually(t, 10*time.Second, func() bool {
		return hosttest.Count(t, b.db, `SELECT count(*) FROM webhook_deliveries
			WHERE status = 'pending' AND claim_id IS NULL AND attempt_count = 0 AND next_attempt_at > ?`, due) == 1
	}, "the delivery is pending, unclaimed, uncounted and due later")
	assert.Zero(t, hosttest.Count(t, b.db, `SELECT count(*) FROM webhook_attempts`), "no attempt is recorded")
	assert.Zero(t, rc.count(), "nothing was sent")
	assert.Empty(t, b.failedEvents())

	r := b.call(http.MethodGet, "/subscriptions/"+id, nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.EqualValues(t, 0, r.json(t)["consecutive_failures"], "nothing counts toward auto-disable")
	r = b.call(http.MethodGet, "/deliveries?subscription_id="+id, nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.NotContains(t, string(r.body), "k1", "the tenant sees no key id")
}
