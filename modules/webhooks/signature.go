package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// Standard Webhooks request headers.
const (
	headerID        = "webhook-id"
	headerTimestamp = "webhook-timestamp"
	headerSignature = "webhook-signature"
)

// sign returns one Standard Webhooks v1 signature: HMAC-SHA256 over "id.timestamp.body".
func sign(key []byte, msgID string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// signatureHeader signs with every key (the current one and, during a rotation, the previous one),
// space-separated as the spec wants, so a receiver holding either secret verifies.
func signatureHeader(keys [][]byte, msgID string, timestamp int64, body []byte) string {
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		sigs = append(sigs, sign(k, msgID, timestamp, body))
	}
	return strings.Join(sigs, " ")
}
