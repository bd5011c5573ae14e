// Package signing is the Standard Webhooks (v1) side of a delivery: the whsec_ secret format and the
// HMAC-SHA256 signature over "id.timestamp.body" that receivers verify. It knows nothing of
// subscriptions or storage, so the receivers' reference library can be checked against it alone, and
// its hot path (one signature per send) is kept free of allocations but the signature string.
package signing

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
)

const (
	// Prefix starts every secret.
	Prefix = "whsec_"
	// secretBytes is the size of a generated key.
	secretBytes = 32
	// Key sizes the Standard Webhooks spec allows for a client-supplied secret.
	minSecretBytes = 24
	maxSecretBytes = 64
)

// Standard Webhooks request headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Key is an opened secret with a pool of HMAC states keyed by it, so a send does not rebuild
// the key's inner and outer pads. It lives as long as the opened subscription that holds it.
type Key struct{ macs *sync.Pool }

// macState is a pooled HMAC state with the scratch space of one signature: bytes written through the
// hash.Hash interface escape, so stack arrays would be allocated on every call.
type macState struct {
	mac     hash.Hash
	scratch [160]byte // an event id (at most 128) and its dot, or the timestamp and its dot
	sum     [sha256.Size]byte
}

// NewKey opens an HMAC key (SecretKey of a stored secret).
func NewKey(secret []byte) Key {
	return Key{macs: &sync.Pool{New: func() any { return &macState{mac: hmac.New(sha256.New, secret)} }}}
}

// KeysOf opens each key, the current one first.
func KeysOf(secrets [][]byte) []Key {
	keys := make([]Key, len(secrets))
	for i, s := range secrets {
		keys[i] = NewKey(s)
	}
	return keys
}

// Sign returns one Standard Webhooks v1 signature: HMAC-SHA256 over "id.timestamp.body".
func (k Key) Sign(msgID string, timestamp int64, body []byte) string {
	st := k.macs.Get().(*macState)
	defer k.macs.Put(st)
	st.mac.Reset()
	st.mac.Write(append(append(st.scratch[:0], msgID...), '.'))
	st.mac.Write(append(strconv.AppendInt(st.scratch[:0], timestamp, 10), '.'))
	st.mac.Write(body)
	var out [3 + 44]byte // "v1," and the base64 of 32 bytes
	copy(out[:], "v1,")
	base64.StdEncoding.Encode(out[3:], st.mac.Sum(st.sum[:0]))
	return string(out[:])
}

// Header signs with every key (the current one and, during a rotation, the previous one),
// space-separated as the spec wants, so a receiver holding either secret verifies.
func Header(keys []Key, msgID string, timestamp int64, body []byte) string {
	if len(keys) == 1 {
		return keys[0].Sign(msgID, timestamp, body)
	}
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		sigs = append(sigs, k.Sign(msgID, timestamp, body))
	}
	return strings.Join(sigs, " ")
}

// NewSecret returns "whsec_" + base64 of 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return Prefix + base64.StdEncoding.EncodeToString(b), nil
}

// SecretKey decodes a "whsec_" secret into its HMAC key, refusing what receivers could not use.
func SecretKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, Prefix)
	if !ok {
		return nil, errors.New(`must start with "whsec_"`)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(rest)
	if err != nil {
		return nil, errors.New(`must be "whsec_" followed by standard base64`)
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return nil, fmt.Errorf("must decode to %d–%d bytes", minSecretBytes, maxSecretBytes)
	}
	return key, nil
}
