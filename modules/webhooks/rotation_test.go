package webhooks

import (
	"database/sql"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	"github.com/keelson/keelson/platform/concurrency"
)

func TestTwentyConcurrentRotationsOnTwoReplicasLeaveEverySecretHandedOutVerifyingUntilItsExpiry(t *testing.T) {
	box := testBox(t, testKey1)
	a := newHarness(t, testConfig(), harnessOptions{secrets: box})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database, secrets: box})
	rc := newReceiver(t, nil)
	idText := a.subscribeWithHeader(rc.URL + "/hook")
	id := uuid.MustParse(idText)

	const rotations = 20
	start := time.Now()
	handedOut := make(chan string, rotations)
	var wg sync.WaitGroup
	for i := range rotations {
		replica := []*harness{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, secret, err := replica.svc.RotateSecret(tenantContext(), id, "", concurrency.Precondition{})
			if err != nil {
				t.Errorf("rotation %d: %v", i, err)
				return
			}
			handedOut <- secret
		}()
	}
	wg.Wait()
	end := time.Now()
	close(handedOut)
	secrets := []string{testSecret}
	for s := range handedOut {
		secrets = append(secrets, s)
	}
	require.Len(t, secrets, rotations+1)

	sub, err := b.svc.store.subscription(tenantContext(), id)
	require.NoError(t, err)
	require.Len(t, sub.PreviousSecrets, rotations)
	requireSealedUnder(t, b.storedSecrets(idText), "k1")

	// Every rotation happened after start, so every rotated-out secret signs until at least start+24h.
	verifies := func(at time.Time, secret string) bool {
		keys, err := sub.signingKeys(at, b.svc.sealer)
		require.NoError(t, err)
		body, msgID, ts := []byte(`{"n":1}`), "msg_rotation", time.Now().Unix()
		header := http.Header{}
		header.Set(signing.HeaderID, msgID)
		header.Set(signing.HeaderTimestamp, strconv.FormatInt(ts, 10))
		header.Set(signing.HeaderSignature, signing.Header(signing.KeysOf(keys), msgID, ts, body))
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		return wh.Verify(body, header) == nil
	}
	for _, secret := range secrets {
		require.True(t, verifies(time.Now(), secret), "a secret handed out verifies now")
		require.True(t, verifies(start.Add(previousSecretTTL-time.Second), secret), "and until its expiry")
	}
	current, err := b.svc.sealer.openSecret(id, sub.Secret)
	require.NoError(t, err)
	for _, secret := range secrets {
		require.Equal(t, secret == current, verifies(end.Add(previousSecretTTL+time.Second), secret), "after the expiries only the current secret verifies")
	}
}

func TestADeletedSubscriptionKeepsNoSecretAndExpiredPreviousSecretsAreWiped(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{secrets: testBox(t, testKey1)})
	rc := newReceiver(t, nil)
	gone, kept := h.subscribeWithHeader(rc.URL+"/gone"), h.subscribeWithHeader(rc.URL+"/kept")
	for _, id := range []string{gone, kept} {
		for _, in := range []string{"1h", "2h"} {
			r := h.call(http.MethodPost, "/subscriptions/"+id+"/rotate-secret", map[string]any{"expire_previous_in": in})
			require.Equal(t, http.StatusOK, r.status, string(r.body))
		}
	}
	r := h.call(http.MethodDelete, "/subscriptions/"+gone, nil)
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	require.Equal(t, storedSecrets{Secret: "", PreviousSecrets: "[]", Headers: "{}"}, h.storedSecrets(gone), "wiped with the delete")

	expiry := func() *time.Time {
		var at sql.NullTime
		require.NoError(t, h.db.Gorm().Raw(`SELECT previous_secrets_expire_at FROM webhook_subscriptions WHERE id = ?`, kept).Row().Scan(&at))
		if !at.Valid {
			return nil
		}
		return &at.Time
	}
	first := expiry()
	require.NotNil(t, first)
	ctx := tenantContext()
	n, err := h.svc.wipeExpiredSecretsBatch(ctx, first.Add(-time.Second), 10)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is due before the earliest expiry")

	n, err = h.svc.wipeExpiredSecretsBatch(ctx, first.Add(time.Second), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	sub, err := h.svc.store.subscription(ctx, uuid.MustParse(kept))
	require.NoError(t, err)
	require.Len(t, sub.PreviousSecrets, 1, "the one rotated out with 2h stays")
	require.True(t, sub.PreviousSecrets[0].ExpiresAt.After(first.Add(50*time.Minute)))
	require.True(t, sub.PreviousSecrets[0].ExpiresAt.Equal(*expiry()), "the earliest expiry moves to the one left")

	n, err = h.svc.wipeExpiredSecretsBatch(ctx, first.Add(2*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "[]", h.storedSecrets(kept).PreviousSecrets)
	require.Nil(t, expiry())
	require.NoError(t, h.svc.WipeExpiredSecrets(ctx))
}

func TestBadExpirePreviousInGets422AndRotatesNothing(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	id, _ := h.subscribe("http://127.0.0.1:9/hook", "*")
	before := h.storedSecrets(id)
	for _, in := range []any{"8d", "169h", "-1m", "tomorrow", 3600, true} {
		r := h.call(http.MethodPost, "/subscriptions/"+id+"/rotate-secret", map[string]any{"expire_previous_in": in})
		require.Contains(t, []int{http.StatusUnprocessableEntity, http.StatusBadRequest}, r.status, "%v: %s", in, r.body)
		require.Equal(t, before, h.storedSecrets(id), "%v", in)
	}
	r := h.call(http.MethodPost, "/subscriptions/"+id+"/rotate-secret", map[string]any{"expire_previous_in": "169h"})
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	require.Equal(t, "expire_previous_in", r.json(t)["errors"].([]any)[0].(map[string]any)["field"])
	r = h.call(http.MethodPost, "/subscriptions/"+id+"/rotate-secret", map[string]any{"expire_previous_in": "0s"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "[]", h.storedSecrets(id).PreviousSecrets, `"0s" keeps no previous secret`)
}
