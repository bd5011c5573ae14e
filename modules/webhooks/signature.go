package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"sync"
)

// Standard Webhooks request headers.
const (
	headerID        = "webhook-id"
	headerTimestamp = "webhook-timestamp"
	headerSignature = "webhook-signature"
)

// signingKey is an opened secret with a pool of HMAC states keyed by it, so a send does not rebuild
// the key's inner and outer pads. It lives as long as the opened subscription that holds it.
type signingKey struct{ macs *sync.Pool }

// macState is a pooled HMAC state with the scratch space of one signature: bytes written through the
// hash.Hash interface escape, so stack arrays would be allocated on every call.
type macState struct {
	mac     hash.Hash
	scratch [160]byte // an event id (at most 128) and its dot, or the timestamp and its dot
	sum     [sha256.Size]byte
}

func newSigningKey(secret []byte) signingKey {
	return signingKey{macs: &sync.Pool{New: func() any { return &macState{mac: hmac.New(sha256.New, secret)} }}}
}

func signingKeysOf(secrets [][]byte) []signingKey {
	keys := make([]signingKey, len(secrets))
	for i, s := range secrets {
		keys[i] = newSigningKey(s)
	}
	return keys
}

// sign returns one Standard Webhooks v1 signature: HMAC-SHA256 over "id.timestamp.body".
func (k signingKey) sign(msgID string, timestamp int64, body []byte) string {
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

// signatureHeader signs with every key (the current one and, during a rotation, the previous one),
// space-separated as the spec wants, so a receiver holding either secret verifies.
func signatureHeader(keys []signingKey, msgID string, timestamp int64, body []byte) string {
	if len(keys) == 1 {
		return keys[0].sign(msgID, timestamp, body)
	}
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		sigs = append(sigs, k.sign(msgID, timestamp, body))
	}
	return strings.Join(sigs, " ")
}
