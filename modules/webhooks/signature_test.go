package webhooks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/webhooks/internal/egress"
	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	"github.com/keelson/keelson/platform/apperr"
)

func TestEachRotatedOutSecretSignsUntilItsOwnExpiry(t *testing.T) {
	now := time.Now()
	sub, first, err := newSubscription(SubscriptionInput{URL: "https://example.com/hook", EventTypes: []string{"*"}}, now, egress.Policy{}, sealer{})
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
			k, err := signing.SecretKey(s)
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
	sub, _, err := newSubscription(SubscriptionInput{URL: "https://example.com/hook", EventTypes: []string{"*"}}, now, egress.Policy{}, sealer{})
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
