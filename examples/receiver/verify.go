package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers (https://www.standardwebhooks.com).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Verification errors.
var (
	ErrMissingHeaders = errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	ErrBadTimestamp   = errors.New("webhook-timestamp outside the tolerance")
	ErrNoMatch        = errors.New("no signature matches")
)

// Verifier checks Standard Webhooks v1 signatures against one or more secrets (several during a rotation).
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// NewVerifier decodes whsec_ secrets. No secrets = verification disabled (Verify accepts everything).
func NewVerifier(secrets []string, tolerance time.Duration) (*Verifier, error) {
	v := &Verifier{tolerance: tolerance, now: time.Now}
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || len(key) == 0 {
			return nil, fmt.Errorf("secret %.10s…: not whsec_<base64>", s)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// Enabled reports whether signatures are checked.
func (v *Verifier) Enabled() bool { return len(v.keys) > 0 }

// Verify accepts the request when any `v1,<signature>` of the header is the HMAC-SHA256 of
// "id.timestamp.body" under any secret, and the timestamp is within the tolerance (replay guard).
func (v *Verifier) Verify(body []byte, h http.Header) error {
	if !v.Enabled() {
		return nil
	}
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadTimestamp
	}
	if d := v.now().Sub(time.Unix(sec, 0)); d > v.tolerance || d < -v.tolerance {
		return ErrBadTimestamp
	}
	for _, key := range v.keys {
		want := Sign(key, id, sec, body)
		for _, sig := range strings.Split(sigs, " ") {
			if hmac.Equal([]byte(sig), []byte(want)) {
				return nil
			}
		}
	}
	return ErrNoMatch
}

// Sign returns the `v1,<base64>` signature of one request.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
