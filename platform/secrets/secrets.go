// Package secrets seals values stored at rest (webhook signing secrets, credentials sent to receivers)
// with AES-256-GCM under keys from KEELSON_ENCRYPTION_KEYS. A sealed value names the key that sealed
// it, so keys can be added and retired (`keelson secrets reencrypt`) without a flag day; each value is
// bound to its row and column by additional data, so a ciphertext copied into another row does not open.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// prefix starts every sealed value: "v1:<key id>:<base64 of nonce and ciphertext>".
const prefix = "v1:"

// keyIDPattern keeps ids short and free of the separators the sealed form uses.
var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Box seals and opens values. The zero Box, and a nil one, hold no key: they store values as they
// are (the quick start) and open sealed ones with an error naming the missing key.
type Box struct {
	ids  []string // ids[0] seals
	aead map[string]cipher.AEAD
}

// Parse reads "id:base64key,id:base64key,..." (32-byte keys, standard or URL base64); the first key
// seals, every key opens. An empty string is a Box without keys.
func Parse(spec string) (*Box, error) {
	b := &Box{aead: map[string]cipher.AEAD{}}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return b, nil
	}
	for i, pair := range strings.Split(spec, ",") {
		id, raw, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok {
			return nil, fmt.Errorf("key %d: want id:base64key", i+1)
		}
		if !keyIDPattern.MatchString(id) {
			return nil, fmt.Errorf("key %d: id %q must be 1–32 of A-Z a-z 0-9 _ -", i+1, id)
		}
		if _, dup := b.aead[id]; dup {
			return nil, fmt.Errorf("key %s: given twice", id)
		}
		key, err := decodeKey(raw)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", id, err)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", id, err)
		}
		b.ids = append(b.ids, id)
		b.aead[id] = aead
	}
	return b, nil
}

func decodeKey(raw string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if key, err := enc.Strict().DecodeString(raw); err == nil {
			if len(key) != 32 {
				return nil, fmt.Errorf("must decode to 32 bytes (AES-256), got %d", len(key))
			}
			return key, nil
		}
	}
	return nil, errors.New("must be base64 of 32 random bytes (openssl rand -base64 32)")
}

// Enabled reports whether values are sealed; without keys they are stored as they are.
func (b *Box) Enabled() bool { return b != nil && len(b.ids) > 0 }

// CurrentKeyID is the id of the key that seals, "" without keys.
func (b *Box) CurrentKeyID() string {
	if !b.Enabled() {
		return ""
	}
	return b.ids[0]
}

// CurrentPrefix is how a value sealed under the current key starts, "" without keys: a query finds
// the rows reencrypt still has to rewrite with NOT LIKE CurrentPrefix || '%'.
func (b *Box) CurrentPrefix() string {
	if !b.Enabled() {
		return ""
	}
	return prefix + b.ids[0] + ":"
}

// IsSealed reports whether v has the sealed form (whichever key).
func IsSealed(v string) bool { return strings.HasPrefix(v, prefix) }

// Current reports whether v needs no rewrite: sealed under the current key, or empty; without keys
// every value is current.
func (b *Box) Current(v string) bool {
	return v == "" || !b.Enabled() || strings.HasPrefix(v, b.CurrentPrefix())
}

// Seal encrypts plaintext under the current key, bound to aad (the row and column it is stored in).
// Without keys it returns plaintext unchanged; an empty plaintext stays empty (nothing to protect).
func (b *Box) Seal(plaintext string, aad string) (string, error) {
	if plaintext == "" || !b.Enabled() {
		return plaintext, nil
	}
	id := b.ids[0]
	aead := b.aead[id]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secrets: nonce: %w", err)
	}
	sealed := aead.Seal(nonce, nonce, []byte(plaintext), []byte(aad))
	return prefix + id + ":" + base64.StdEncoding.EncodeToString(sealed), nil
}

// Open returns the plaintext of a stored value: a sealed one is decrypted with the key it names and
// must carry the same aad; any other value is plaintext written before keys were configured, and is
// returned as it is.
func (b *Box) Open(stored string, aad string) (string, error) {
	if !IsSealed(stored) {
		return stored, nil
	}
	id, body, ok := strings.Cut(strings.TrimPrefix(stored, prefix), ":")
	if !ok {
		return "", errors.New("secrets: malformed sealed value")
	}
	var aead cipher.AEAD
	if b != nil {
		aead = b.aead[id]
	}
	if aead == nil {
		return "", &MissingKeyError{ID: id}
	}
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return "", errors.New("secrets: malformed sealed value")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(aad))
	if err != nil {
		return "", fmt.Errorf("secrets: value sealed with key %q does not open here (altered, or moved from another row)", id)
	}
	return string(plain), nil
}
