package console

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks"
	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/auth"
)

// A session cookie is base64url(id ‖ secret). The row keyed by id keeps a hash of the secret and the API
// token sealed with AES-256-GCM under a key derived from the secret, so neither the database nor the
// cookie alone yields the token, and any replica can open the session.
const (
	secretBytes = 32
	cookieBytes = 16 + secretBytes
)

// errNoSession is any cookie that does not open a live session: absent, malformed, unknown, expired.
var errNoSession = errors.New("console: no session")

// errPortalEnded is a portal session whose link was revoked or expired: the customer is told so
// instead of being sent to an operator's sign-in.
var errPortalEnded = errors.New("console: portal link ended")

type session struct {
	ID      uuid.UUID
	Token   string
	CSRF    string
	Expires time.Time
	scopes  []auth.Scope // the token's, read at each request; nil when the console cannot tell
	// Portal is the link a customer's session was opened from; nil for an operator's sign-in.
	Portal *portalGrant
}

// portalGrant is what a portal session may see beyond its token's tenant and scopes.
type portalGrant struct {
	LinkID     uuid.UUID
	Name       string
	EventTypes []string // patterns; empty = every event type
	ReadOnly   bool
}

// covers reports whether the grant lets its session subscribe to pattern.
func (p *portalGrant) covers(pattern string) bool {
	if p == nil || len(p.EventTypes) == 0 {
		return true
	}
	return slices.ContainsFunc(p.EventTypes, func(outer string) bool { return webhooks.PatternCovers(outer, pattern) })
}

// sees reports whether the grant shows deliveries and catalog entries of eventType.
func (p *portalGrant) sees(eventType string) bool {
	if p == nil || len(p.EventTypes) == 0 || eventType == contract.TestEvent {
		return true
	}
	return slices.ContainsFunc(p.EventTypes, func(pattern string) bool { return webhooks.PatternMatches(pattern, eventType) })
}

// seesEndpoint reports whether every pattern of an endpoint is within the grant: a customer sees only
// endpoints whose deliveries it may see.
func (p *portalGrant) seesEndpoint(patterns []string) bool {
	for _, pt := range patterns {
		if !p.covers(pt) {
			return false
		}
	}
	return true
}

// allows reports whether the session's token has scope; a console that cannot tell offers the
// action and lets the API answer.
func (s *session) allows(scope auth.Scope) bool {
	return scope == "" || s.scopes == nil || slices.Contains(s.scopes, scope)
}

type sessionStore struct {
	db  *sql.DB
	ttl time.Duration
}

func deriveKey(secret []byte, purpose string) []byte {
	key, err := hkdf.Key(sha256.New, secret, nil, "keelson console "+purpose, 32)
	if err != nil {
		panic(fmt.Sprintf("console: hkdf: %v", err)) // only fails for absurd lengths
	}
	return key
}

func secretHash(secret []byte) []byte { return deriveKey(secret, "session id check") }

// csrfToken is bound to the session's secret, so a page of another origin cannot know it and a
// replica can check it without storing it.
func csrfToken(secret []byte) string {
	mac := hmac.New(sha256.New, deriveKey(secret, "csrf"))
	mac.Write([]byte("form"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func sealToken(secret []byte, token string) ([]byte, error) {
	aead, err := tokenCipher(secret)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, []byte(token), nil), nil
}

func openToken(secret, sealed []byte) (string, error) {
	aead, err := tokenCipher(secret)
	if err != nil {
		return "", err
	}
	if len(sealed) < aead.NonceSize() {
		return "", errNoSession
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], nil)
	if err != nil {
		return "", errNoSession
	}
	return string(plain), nil
}

func tokenCipher(secret []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(deriveKey(secret, "token seal"))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// create stores a new session for token and returns it with the cookie value that opens it.
func (s *sessionStore) create(ctx context.Context, token string) (session, string, error) {
	return s.createFor(ctx, token, time.Now().Add(s.ttl), nil, uuid.Nil)
}

// createFor stores a session for token until expires, opened from link (nil = a sign-in) with the
// API token tokenID it was given.
func (s *sessionStore) createFor(ctx context.Context, token string, expiresAt time.Time, link *PortalLink, tokenID uuid.UUID) (session, string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return session{}, "", err
	}
	secret := make([]byte, secretBytes)
	if _, err := rand.Read(secret); err != nil {
		return session{}, "", err
	}
	sealed, err := sealToken(secret, token)
	if err != nil {
		return session{}, "", err
	}
	expires := expiresAt.UTC().Truncate(time.Microsecond)
	var linkID, apiToken uuid.NullUUID
	var grant *portalGrant
	if link != nil {
		linkID = uuid.NullUUID{UUID: link.ID, Valid: true}
		apiToken = uuid.NullUUID{UUID: tokenID, Valid: true}
		grant = &portalGrant{LinkID: link.ID, Name: link.Name, EventTypes: link.EventTypes, ReadOnly: link.ReadOnly}
	}
	if _, err := s.db.ExecContext(ctx,
		`INSERT INTO console_sessions (id, secret_hash, sealed_token, expires_at, portal_link_id, api_token_id)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		id, secretHash(secret), sealed, expires, linkID, apiToken); err != nil {
		return session{}, "", fmt.Errorf("console: create session: %w", err)
	}
	cookie := base64.RawURLEncoding.EncodeToString(append(id[:], secret...))
	return session{ID: id, Token: token, CSRF: csrfToken(secret), Expires: expires, Portal: grant}, cookie, nil
}

// open returns the live session a cookie value names, or errNoSession.
func (s *sessionStore) open(ctx context.Context, cookie string) (session, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cookie)
	if err != nil || len(raw) != cookieBytes {
		return session{}, errNoSession
	}
	id, secret := uuid.UUID(raw[:16]), raw[16:]
	var hash, sealed []byte
	var expires time.Time
	var linkID uuid.NullUUID
	var linkName, linkTypes sql.NullString
	var readOnly sql.NullBool
	// A portal session lives only while its link does: revoked or expired, the session ends with it.
	var live bool
	err = s.db.QueryRowContext(ctx,
		`SELECT s.secret_hash, s.sealed_token, s.expires_at, s.portal_link_id, l.name, l.event_types::text, l.read_only,
			s.expires_at > now() AND (l.id IS NULL OR (l.revoked_at IS NULL AND l.expires_at > now()))
		FROM console_sessions s LEFT JOIN portal_links l ON l.id = s.portal_link_id
		WHERE s.id = $1`, id).
		Scan(&hash, &sealed, &expires, &linkID, &linkName, &linkTypes, &readOnly, &live)
	if errors.Is(err, sql.ErrNoRows) {
		return session{}, errNoSession
	}
	if err != nil {
		return session{}, fmt.Errorf("console: open session: %w", err)
	}
	if subtle.ConstantTimeCompare(hash, secretHash(secret)) != 1 {
		return session{}, errNoSession
	}
	if !live {
		if !linkID.Valid {
			return session{}, errNoSession
		}
		_ = s.end(ctx, id)
		return session{}, errPortalEnded
	}
	token, err := openToken(secret, sealed)
	if err != nil {
		return session{}, err
	}
	out := session{ID: id, Token: token, CSRF: csrfToken(secret), Expires: expires}
	if linkID.Valid {
		out.Portal = &portalGrant{LinkID: linkID.UUID, Name: linkName.String,
			EventTypes: parseTextArray(linkTypes.String), ReadOnly: readOnly.Bool}
	}
	return out, nil
}

// end deletes the session: sign-out holds on every replica at once.
func (s *sessionStore) end(ctx context.Context, id uuid.UUID) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM console_sessions WHERE id = $1`, id)
	return err
}

// prune deletes expired sessions in bounded batches and returns how many went.
func (s *sessionStore) prune(ctx context.Context) (int64, error) {
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, `DELETE FROM console_sessions WHERE id IN
			(SELECT id FROM console_sessions WHERE expires_at <= now() LIMIT 1000)`)
		if err != nil {
			return total, err
		}
		n, _ := res.RowsAffected()
		total += n
		if n < 1000 {
			return total, nil
		}
	}
}

// sameToken compares two CSRF tokens in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
