package webhooks

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
)

const (
	secretPrefix = "whsec_"
	// secretBytes is the size of a generated key.
	secretBytes = 32
	// Key sizes the Standard Webhooks spec allows for a client-supplied secret.
	minSecretBytes = 24
	maxSecretBytes = 64
	// previousSecretTTL is how long a rotated-out secret keeps signing beside the new one.
	previousSecretTTL = 24 * time.Hour
)

// newSecret returns "whsec_" + base64 of 32 random bytes.
func newSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// secretKey decodes a "whsec_" secret into its HMAC key, refusing what receivers could not use.
func secretKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, secretPrefix)
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
