package signing

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

func TestSignReproducesTheStandardWebhooksTestVector(t *testing.T) {
	key, err := SecretKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)

	got := NewKey(key).Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))

	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
}

func headersFor(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, sig)
	return h
}

func TestSignaturesVerifyWithTheReferenceLibraryAndTamperingIsDetected(t *testing.T) {
	secret, err := NewSecret()
	require.NoError(t, err)
	key, err := SecretKey(secret)
	require.NoError(t, err)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	body := []byte(`{"id":"evt_1","type":"proposal.accepted","data":{"a":1}}`)
	ts := time.Now().Unix()

	require.NoError(t, wh.Verify(body, headersFor("evt_1", ts, Header([]Key{NewKey(key)}, "evt_1", ts, body))))

	sig := Header([]Key{NewKey(key)}, "evt_1", ts, body)
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
	oldSecret, _ := NewSecret()
	newSecretValue, _ := NewSecret()
	oldKey, _ := SecretKey(oldSecret)
	newKey, _ := SecretKey(newSecretValue)
	body := []byte(`{"x":true}`)
	ts := time.Now().Unix()
	h := headersFor("evt_rot", ts, Header(KeysOf([][]byte{newKey, oldKey}), "evt_rot", ts, body))

	for _, s := range []string{oldSecret, newSecretValue} {
		wh, err := standardwebhooks.NewWebhook(s)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, h))
	}
	other, _ := NewSecret()
	wh, _ := standardwebhooks.NewWebhook(other)
	require.Error(t, wh.Verify(body, h))
}

func TestSecretsAreGeneratedWith32RandomBytesAndValidated(t *testing.T) {
	a, err := NewSecret()
	require.NoError(t, err)
	b, _ := NewSecret()
	require.NotEqual(t, a, b)
	key, err := SecretKey(a)
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
		_, err := SecretKey(tc.secret)
		require.Equal(t, tc.ok, err == nil, "secret %q: %v", tc.secret, err)
	}
}
