package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/secrets"
)

const (
	testKey1 = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	testKey2 = "k2:ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
	// testSecret is a client-supplied signing secret the tests look for in stored rows.
	testSecret       = "whsec_c2VhbGVkLXNlY3JldC1mb3ItdGhlLXRlc3RzLW9ubHk="
	testHeaderSecret = "Bearer receiver-credential-7f3a"
)

func testBox(t testing.TB, spec string) *secrets.Box {
	t.Helper()
	box, err := secrets.Parse(spec)
	require.NoError(t, err)
	return box
}

// storedSecrets is a subscription's row as PostgreSQL holds it.
type storedSecrets struct {
	Secret, PreviousSecrets, Headers string
}

func (h *harness) storedSecrets(id string) storedSecrets {
	h.t.Helper()
	var row storedSecrets
	require.NoError(h.t, h.db.Gorm().Raw(`SELECT secret, previous_secrets::text, headers FROM webhook_subscriptions WHERE id = ?`, id).
		Row().Scan(&row.Secret, &row.PreviousSecrets, &row.Headers))
	return row
}

// subscribeWithHeader creates a subscription with the test secret and an Authorization header.
func (h *harness) subscribeWithHeader(url string) string {
	h.t.Helper()
	r := h.call(http.MethodPost, "/subscriptions", map[string]any{"url": url, "event_types": []string{"*"},
		"secret": testSecret, "headers": map[string]string{"Authorization": testHeaderSecret}})
	require.Equal(h.t, http.StatusCreated, r.status, string(r.body))
	require.Equal(h.t, testSecret, r.json(h.t)["secret"])
	return r.json(h.t)["id"].(string)
}

// requireSealedUnder fails unless every secret and header value of the row is sealed under keyID.
func requireSealedUnder(t testing.TB, row storedSecrets, keyID string) {
	t.Helper()
	prefix := "v1:" + keyID + ":"
	require.True(t, strings.HasPrefix(row.Secret, prefix), "secret %q", row.Secret)
	var previous previousSecrets
	require.NoError(t, json.Unmarshal([]byte(row.PreviousSecrets), &previous))
	for _, ps := range previous {
		require.True(t, strings.HasPrefix(ps.Secret, prefix), "previous secret %q", ps.Secret)
	}
	var headers map[string]string
	require.NoError(t, json.Unmarshal([]byte(row.Headers), &headers))
	require.NotEmpty(t, headers)
	for name, v := range headers {
		require.True(t, strings.HasPrefix(v, prefix), "header %s: %q", name, v)
	}
	all := row.Secret + row.PreviousSecrets + row.Headers
	require.NotContains(t, all, testSecret)
	require.NotContains(t, all, testHeaderSecret)
}

// requireVerifiedWith waits for the receiver's nth request and checks its signature against secret
// and its custom header.
func requireVerifiedWith(t testing.TB, rc *receiver, n int, secret string) {
	t.Helper()
	hosttest.Eventually(t, 20*time.Second, func() bool { return rc.count() >= n }, "receiver got %d of %d requests", rc.count(), n)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	req := rc.received()[n-1]
	require.NoError(t, wh.Verify(req.body, req.header))
	require.Equal(t, testHeaderSecret, req.header.Get("Authorization"))
}

func TestSecretsAndHeaderValuesAreStoredSealedAndOpenedOnlyToSignAndSend(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true, secrets: testBox(t, testKey1)})
	rc := newReceiver(t, nil)
	id := h.subscribeWithHeader(rc.URL + "/hook")
	requireSealedUnder(t, h.storedSecrets(id), "k1")

	r := h.call(http.MethodGet, "/subscriptions/"+id, nil)
	require.Equal(t, map[string]any{"Authorization": redactedValue}, r.json(t)["headers"])
	require.Nil(t, r.json(t)["secret"])

	h.publish("order.created", map[string]any{"n": 1})
	requireVerifiedWith(t, rc, 1, testSecret)

	r = h.call(http.MethodPost, "/subscriptions/"+id+"/rotate-secret", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	rotated := r.json(t)["secret"].(string)
	require.True(t, strings.HasPrefix(rotated, signing.Prefix))
	row := h.storedSecrets(id)
	requireSealedUnder(t, row, "k1")
	require.NotContains(t, row.Secret, rotated)
	require.Contains(t, row.PreviousSecrets, "v1:k1:")

	h.publish("order.created", map[string]any{"n": 2})
	requireVerifiedWith(t, rc, 2, testSecret) // the rotated-out secret still verifies...
	requireVerifiedWith(t, rc, 2, rotated)    // ...and so does the new one
}

func TestASealedValueMovedToAnotherSubscriptionDoesNotOpen(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{secrets: testBox(t, testKey1)})
	rc := newReceiver(t, nil)
	a, b := h.subscribeWithHeader(rc.URL+"/a"), h.subscribeWithHeader(rc.URL+"/b")
	require.NoError(t, h.db.Gorm().Exec(`UPDATE webhook_subscriptions SET secret = (SELECT secret FROM webhook_subscriptions WHERE id = ?) WHERE id = ?`, a, b).Error)
	sub, err := h.svc.store.subscription(tenantContext(), uuid.MustParse(b))
	require.NoError(t, err)
	_, err = sub.signingKeys(time.Now(), h.svc.sealer)
	require.ErrorContains(t, err, "does not open here")
}

func TestPlaintextRowsKeepWorkingAndReencryptSealsThemThenRewritesThemUnderANewKey(t *testing.T) {
	plain := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	id := plain.subscribeWithHeader(rc.URL + "/hook")
	row := plain.storedSecrets(id)
	require.Equal(t, testSecret, row.Secret, "without keys the secret is stored as it is")
	r := plain.call(http.MethodPost, "/subscriptions/"+id+"/rotate-secret", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	rotated := r.json(t)["secret"].(string)

	// A replica with k1 opens what was stored in plaintext, and reencrypt seals it.
	k1 := newHarness(t, testConfig(), harnessOptions{database: plain.database, secrets: testBox(t, testKey1)})
	sealed, err := k1.svc.resealSubscriptions(context.Background(), 10)
	require.NoError(t, err)
	require.Equal(t, 1, sealed)
	requireSealedUnder(t, k1.storedSecrets(id), "k1")
	again, err := k1.svc.resealSubscriptions(context.Background(), 10)
	require.NoError(t, err)
	require.Zero(t, again, "nothing is left to seal")

	// k2 seals now, k1 still opens: deliveries verify before and after the rewrite under k2.
	k2 := newHarness(t, testConfig(), harnessOptions{database: plain.database, bus: true, jobs: true, secrets: testBox(t, testKey2+","+testKey1)})
	k2.publish("order.created", map[string]any{"n": 1})
	requireVerifiedWith(t, rc, 1, testSecret)
	requireVerifiedWith(t, rc, 1, rotated)
	resealed, err := k2.svc.resealSubscriptions(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, 1, resealed)
	requireSealedUnder(t, k2.storedSecrets(id), "k2")
	k2.publish("order.created", map[string]any{"n": 2})
	requireVerifiedWith(t, rc, 2, rotated)
}
