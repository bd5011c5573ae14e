package webhooks

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/apperr"
)

func TestSignReproducesTheStandardWebhooksTestVector(t *testing.T) {
	key, err := secretKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)

	got := newSigningKey(key).sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))

	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
}

func headersFor(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(headerID, id)
	h.Set(headerTimestamp, strconv.FormatInt(ts, 10))
	h.Set(headerSignature, sig)
	return h
}

func TestSignaturesVerifyWithTheReferenceLibraryAndTamperingIsDetected(t *testing.T) {
	secret, err := newSecret()
	require.NoError(t, err)
	key, err := secretKey(secret)
	require.NoError(t, err)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	body := []byte(`{"id":"evt_1","type":"proposal.accepted","data":{"a":1}}`)
	ts := time.Now().Unix()

	require.NoError(t, wh.Verify(body, headersFor("evt_1", ts, signatureHeader([]signingKey{newSigningKey(key)}, "evt_1", ts, body))))

	sig := signatureHeader([]signingKey{newSigningKey(key)}, "evt_1", ts, body)
	for name, h := range map[string]struct {
		body []byte
		hdr  http.Header
	}{
		"body":      {[]byte(`{"id":"evt_1","type":"proposal.accepted","data":{"a":2}}`), headersFor("evt_1", ts, sig)},
		"id":        {body, headersFor("evt_2", ts, sig)},
		"timestamp": {body, headersFor("evt_1", ts-1, sig)},
	} {
		t.Run(name, func(t *testing.T) {
			require.True(t, errors.Is(wh.Verify(h.body, h.hdr), standardwebhooks.ErrNoMatchingSignature))
		})
	}
}

func TestARotationHeaderVerifiesUnderTheOldAndTheNewSecret(t *testing.T) {
	oldSecret, _ := newSecret()
	newSecretValue, _ := newSecret()
	oldKey, _ := secretKey(oldSecret)
	newKey, _ := secretKey(newSecretValue)
	body := []byte(`{"x":true}`)
	ts := time.Now().Unix()
	h := headersFor("evt_rot", ts, signatureHeader(signingKeysOf([][]byte{newKey, oldKey}), "evt_rot", ts, body))

	for _, s := range []string{oldSecret, newSecretValue} {
		wh, err := standardwebhooks.NewWebhook(s)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, h))
	}
	other, _ := newSecret()
	wh, _ := standardwebhooks.NewWebhook(other)
	require.Error(t, wh.Verify(body, h))
}

func TestSecretsAreGeneratedWith32RandomBytesAndValidated(t *testing.T) {
	a, err := newSecret()
	require.NoError(t, err)
	b, _ := newSecret()
	require.NotEqual(t, a, b)
	key, err := secretKey(a)
	require.NoError(t, err)
	require.Len(t, key, 32)

	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	for _, tc := range []struct {
		secret string
		ok     bool
	}{
		{"whsec_" + b64(24), true},
		{"whsec_" + b64(64), true},
		{"whsec_" + b64(23), false},
		{"whsec_" + b64(65), false},
		{b64(32), false},                  // no prefix
		{"whsec_" + b64(32) + "!", false}, // not base64
		{"whsec_" + base64.RawStdEncoding.EncodeToString(make([]byte, 32)), false}, // unpadded: receivers could not decode it
		{"whsec_", false},
	} {
		_, err := secretKey(tc.secret)
		require.Equal(t, tc.ok, err == nil, "secret %q: %v", tc.secret, err)
	}
}

func TestEachRotatedOutSecretSignsUntilItsOwnExpiry(t *testing.T) {
	now := time.Now()
	sub, first, err := newSubscription(SubscriptionInput{URL: "https://example.com/hook", EventTypes: []string{"*"}}, now, targetPolicy{}, sealer{})
	require.NoError(t, err)
	keys, err := sub.signingKeys(now, sealer{})
	require.NoError(t, err)
	require.Len(t, keys, 1)

	second, err := sub.rotateSecret(now, previousSecretTTL, sealer{}) // first signs for 24 h
	require.NoError(t, err)
	third, err := sub.rotateSecret(now.Add(time.Hour), 2*time.Hour, sealer{}) // second signs until now+3h
	require.NoError(t, err)
	require.Equal(t, now.Add(3*time.Hour), *sub.PreviousSecretsExpireAt, "the earliest expiry is kept beside the list")

	keysOf := func(secrets ...string) [][]byte {
		var out [][]byte
		for _, s := range secrets {
			k, err := secretKey(s)
			require.NoError(t, err)
			out = append(out, k)
		}
		return out
	}
	at := func(d time.Duration) [][]byte {
		keys, err := sub.signingKeys(now.Add(d), sealer{})
		require.NoError(t, err)
		return keys
	}
	require.Equal(t, keysOf(third, second, first), at(2*time.Hour), "the second rotation within 24 h keeps both earlier secrets")
	require.Equal(t, keysOf(third, first), at(4*time.Hour))
	require.Equal(t, keysOf(third), at(previousSecretTTL+time.Second))

	_, err = sub.rotateSecret(now.Add(5*time.Hour), 0, sealer{}) // "0s": the third stops signing at once
	require.NoError(t, err)
	require.Len(t, at(5*time.Hour), 2, "the new secret and the first, whose expiry is its own")
}

func TestARotationBeyondTheBoundOfSigningSecretsIsRefusedUntilOneExpires(t *testing.T) {
	now := time.Now()
	sub, _, err := newSubscription(SubscriptionInput{URL: "https://example.com/hook", EventTypes: []string{"*"}}, now, targetPolicy{}, sealer{})
	require.NoError(t, err)
	for i := range maxPreviousSecrets {
		_, err := sub.rotateSecret(now.Add(time.Duration(i)*time.Minute), previousSecretTTL, sealer{})
		require.NoError(t, err)
	}
	_, err = sub.rotateSecret(now.Add(time.Hour), previousSecretTTL, sealer{})
	var conflict *apperr.StateConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, CodeTooManySecrets, conflict.Code)
	_, err = sub.rotateSecret(now.Add(time.Hour), 0, sealer{})
	require.NoError(t, err, "a rotation that keeps no previous secret is always possible")
	_, err = sub.rotateSecret(now.Add(previousSecretTTL+time.Second), previousSecretTTL, sealer{})
	require.NoError(t, err, "possible again once the first expired")
}

func TestExpirePreviousInAccepts0To7Days(t *testing.T) {
	for in, want := range map[string]time.Duration{"": previousSecretTTL, "0s": 0, "90m": 90 * time.Minute, "168h": 7 * 24 * time.Hour} {
		got, err := parseExpirePreviousIn(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"-1s", "168h1s", "1d", "24", "soon"} {
		_, err := parseExpirePreviousIn(in)
		require.Error(t, err, in)
	}
}

// signingKeys is openSigningKeys without the expiries: the keys a request is signed with at now.
func (s *Subscription) signingKeys(now time.Time, seal sealer) ([][]byte, error) {
	keys, _, err := s.openSigningKeys(now, seal)
	return keys, err
}
