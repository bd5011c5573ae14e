package webhooks

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"time"
)

const (
	// previousSecretTTL is how long a rotated-out secret keeps signing beside the new one, unless the
	// rotation says otherwise (expire_previous_in, at most maxPreviousSecretTTL).
	previousSecretTTL    = 24 * time.Hour
	maxPreviousSecretTTL = 7 * 24 * time.Hour
	// maxPreviousSecrets bounds the secrets still signing beside the current one (and so the
	// signatures of every request): a rotation beyond it is refused until one expires.
	maxPreviousSecrets = 30
)

// CodeTooManySecrets is the 409 of a rotation while maxPreviousSecrets rotated-out secrets still sign.
const CodeTooManySecrets = "too_many_previous_secrets" //nolint:gosec // a problem code, not a credential

// previousSecret is a rotated-out secret, sealed like the current one, that signs until ExpiresAt.
type previousSecret struct {
	Secret    string    `json:"secret"`
	ExpiresAt time.Time `json:"expires_at"`
}

// previousSecrets is the list stored as a JSON array, newest first.
type previousSecrets []previousSecret

// Value stores the list as jsonb.
func (p previousSecrets) Value() (driver.Value, error) {
	if p == nil {
		return "[]", nil
	}
	b, err := json.Marshal([]previousSecret(p)) //nolint:gosec // the column's own form: each secret already sealed (platform/secrets)
	return string(b), err
}

// Scan reads the jsonb array.
func (p *previousSecrets) Scan(src any) error {
	return scanJSONB(src, (*[]previousSecret)(p), "previous_secrets")
}

// signingAt keeps the secrets that still sign at now.
func (p previousSecrets) signingAt(now time.Time) previousSecrets {
	var out previousSecrets
	for _, ps := range p {
		if now.Before(ps.ExpiresAt) {
			out = append(out, ps)
		}
	}
	return out
}

// earliestExpiry is when the next of them stops signing, nil for none.
func (p previousSecrets) earliestExpiry() *time.Time {
	var first *time.Time
	for i := range p {
		if first == nil || p[i].ExpiresAt.Before(*first) {
			at := p[i].ExpiresAt
			first = &at
		}
	}
	return first
}

// parseExpirePreviousIn reads a rotation's expire_previous_in: a duration such as "90m" or "48h" from
// 0 (the previous secret stops signing at once) to 7 days; "" is the default 24 h.
func parseExpirePreviousIn(v string) (time.Duration, error) {
	if v == "" {
		return previousSecretTTL, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxPreviousSecretTTL {
		return 0, errors.New(`must be a duration from "0s" to "168h" (7 days), such as "30m" or "48h"`)
	}
	return d, nil
}
