package keelson

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Verifier checks the Standard Webhooks signature of the requests Keelson sends to an endpoint.
// It holds every secret the endpoint trusts: during a rotation the old and the new one.
type Verifier struct {
	hooks []*standardwebhooks.Webhook
}

// NewVerifier trusts secrets, each as Keelson shows it (whsec_…).
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("keelson: a verifier needs at least one secret")
	}
	v := &Verifier{}
	for i, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return nil, fmt.Errorf("keelson: secret %d: %w", i+1, err)
		}
		v.hooks = append(v.hooks, wh)
	}
	return v, nil
}

// ErrSignature is returned for a request no trusted secret signed, or signed too long ago.
var ErrSignature = errors.New("keelson: webhook signature does not verify")

// Verify checks payload against the webhook-id, webhook-timestamp and webhook-signature headers
// (the timestamp within five minutes of now) with each trusted secret in turn.
func (v *Verifier) Verify(payload []byte, header http.Header) error {
	for _, wh := range v.hooks {
		if wh.Verify(payload, header) == nil {
			return nil
		}
	}
	return ErrSignature
}

// VerifyRequest reads r's body (at most maxBytes) and verifies it; the body is returned only when
// it verified.
func (v *Verifier) VerifyRequest(r *http.Request, maxBytes int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("keelson: read webhook body: %w", err)
	}
	if int64(len(body)) > maxBytes {
		return nil, fmt.Errorf("keelson: webhook body over %d bytes", maxBytes)
	}
	if err := v.Verify(body, r.Header); err != nil {
		return nil, err
	}
	return body, nil
}
