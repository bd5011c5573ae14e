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

// sign returns one Standard Webhooks v1 signature: HMAC-SHA256 over "id.timestamp.body".
func sign(key []byte, msgID string, timestamp int64, body []byte) string {
	pool := macPoolOf(key)
	mac := pool.Get().(hash.Hash)
	mac.Reset()
	var buf [160]byte // an event id (at most 128) and its dot
	mac.Write(append(append(buf[:0], msgID...), '.'))
	mac.Write(append(strconv.AppendInt(buf[:0], timestamp, 10), '.'))
	mac.Write(body)
	var sum [sha256.Size]byte
	var out [3 + 44]byte // "v1," and the base64 of 32 bytes
	copy(out[:], "v1,")
	base64.StdEncoding.Encode(out[3:], mac.Sum(sum[:0]))
	pool.Put(mac)
	return string(out[:])
}

// macPools keeps one pool of keyed HMAC states per signing key, so a send does not rebuild the
// key's inner and outer pads. Bounded: past maxMACPools keys (rotated-out secrets, deleted
// subscriptions) it starts afresh.
var macPools = struct {
	sync.RWMutex
	m map[string]*sync.Pool
}{m: map[string]*sync.Pool{}}

const maxMACPools = 10000

func macPoolOf(key []byte) *sync.Pool {
	macPools.RLock()
	p := macPools.m[string(key)]
	macPools.RUnlock()
	if p != nil {
		return p
	}
	macPools.Lock()
	defer macPools.Unlock()
	if p = macPools.m[string(key)]; p != nil {
		return p
	}
	if len(macPools.m) >= maxMACPools {
		macPools.m = map[string]*sync.Pool{}
	}
	k := append([]byte(nil), key...)
	p = &sync.Pool{New: func() any { return hmac.New(sha256.New, k) }}
	macPools.m[string(k)] = p
	return p
}

// signatureHeader signs with every key (the current one and, during a rotation, the previous one),
// space-separated as the spec wants, so a receiver holding either secret verifies.
func signatureHeader(keys [][]byte, msgID string, timestamp int64, body []byte) string {
	if len(keys) == 1 {
		return sign(keys[0], msgID, timestamp, body)
	}
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		sigs = append(sigs, sign(k, msgID, timestamp, body))
	}
	return strings.Join(sigs, " ")
}
