package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/tenancy"
)

// DefaultCacheTTL bounds how long a replica trusts what it read about a token or a tenant: a
// revocation, expiry or tenant disable takes effect on every replica within it.
const DefaultCacheTTL = 5 * time.Second

// Bounds of the caches: a flood of made-up ids fills the negative cache, never the one of real tokens.
const (
	maxCachedTokens  = 100_000
	maxUnknownTokens = 50_000
)

// lastUsedEvery throttles last_used_at writes per token.
const lastUsedEvery = time.Minute

// ErrUnauthenticated is what every refused token unwraps to (401).
var ErrUnauthenticated = errors.New("auth: invalid token")

// ErrTenantDisabled refuses a valid token of a disabled tenant (403).
var ErrTenantDisabled = errors.New("auth: tenant disabled")

// Failure says why a token was refused; it is logged, never shown to the client.
type Failure struct {
	Reason string // missing, malformed, unknown, mismatch, expired, revoked
}

func (f *Failure) Error() string { return "auth: token " + f.Reason }

// Unwrap makes errors.Is(err, ErrUnauthenticated) true.
func (f *Failure) Unwrap() error { return ErrUnauthenticated }

func refused(reason string) error { return &Failure{Reason: reason} }

// Authenticator turns a bearer token into a Principal: stored tokens by id with a constant-time hash
// comparison, and the bootstrap tokens (every scope, default tenant).
type Authenticator struct {
	db        *sql.DB // nil: bootstrap tokens only, no tenant state
	bootstrap [][sha256.Size]byte
	ttl       time.Duration
	now       func() time.Time

	mu      sync.Mutex
	tokens  map[uuid.UUID]*cachedToken // ids found in the table
	unknown map[uuid.UUID]time.Time    // ids not found, and when: the negative cache
	tenants map[uuid.UUID]cachedTenant

	// recordUse writes last_used_at, off the request path; touches counts the writes in flight.
	recordUse func(ctx context.Context, id uuid.UUID)
	touches   sync.WaitGroup
}

type cachedToken struct {
	found          bool
	hash           []byte
	tenant         uuid.UUID
	scopes         []Scope
	expiresAt      *time.Time
	revokedAt      *time.Time
	tenantDisabled bool
	lastUsed       time.Time
	fetched        time.Time
}

type cachedTenant struct {
	disabled bool
	fetched  time.Time
}

// AuthenticatorOptions configure an Authenticator.
type AuthenticatorOptions struct {
	DB              *database.DB // nil accepts only the bootstrap tokens
	BootstrapTokens []string     // API_TOKENS
	CacheTTL        time.Duration
}

// NewAuthenticator checks the bootstrap tokens and returns the authenticator.
func NewAuthenticator(opts AuthenticatorOptions) (*Authenticator, error) {
	a := &Authenticator{ttl: opts.CacheTTL, now: time.Now,
		tokens: map[uuid.UUID]*cachedToken{}, unknown: map[uuid.UUID]time.Time{}, tenants: map[uuid.UUID]cachedTenant{}}
	if opts.DB != nil {
		a.db = opts.DB.SQL()
	}
	if a.ttl == 0 {
		a.ttl = DefaultCacheTTL
	}
	a.recordUse = a.writeLastUsed
	for i, t := range opts.BootstrapTokens {
		if strings.TrimSpace(t) == "" {
			return nil, fmt.Errorf("auth: API token %d is empty", i)
		}
		a.bootstrap = append(a.bootstrap, sha256.Sum256([]byte(t)))
	}
	return a, nil
}

// Authenticate returns the principal token acts as. Refused tokens are a *Failure (ErrUnauthenticated);
// a disabled tenant is ErrTenantDisabled; anything else is the database's error.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, refused("missing")
	}
	if rest, ok := strings.CutPrefix(token, TokenPrefix); ok && a.db != nil {
		return a.stored(ctx, rest)
	}
	// Digests are compared so neither the token nor its length leaks through timing, and every one
	// is compared so the position of a match does not either.
	got := sha256.Sum256([]byte(token))
	match := -1
	for i, d := range a.bootstrap {
		if subtle.ConstantTimeCompare(got[:], d[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		if strings.HasPrefix(token, TokenPrefix) {
			return Principal{}, refused("unknown")
		}
		return Principal{}, refused("malformed")
	}
	p := Principal{TenantID: tenancy.DefaultID, TokenID: fmt.Sprintf("bootstrap-%d", match), Scopes: AllScopes}
	if a.db != nil {
		disabled, err := a.tenantDisabled(ctx, p.TenantID)
		if err != nil {
			return Principal{}, err
		}
		if disabled {
			return Principal{}, ErrTenantDisabled
		}
	}
	return p, nil
}

// stored checks kt_<id>_<secret>.
func (a *Authenticator) stored(ctx context.Context, rest string) (Principal, error) {
	rawID, secret, ok := strings.Cut(rest, "_")
	id, err := uuid.Parse(rawID)
	if !ok || err != nil || len(rawID) != 32 || secret == "" {
		return Principal{}, refused("malformed")
	}
	entry, err := a.lookup(ctx, id)
	if err != nil {
		return Principal{}, err
	}
	got := sha256.Sum256([]byte(secret))
	if !entry.found {
		return Principal{}, refused("unknown")
	}
	if subtle.ConstantTimeCompare(got[:], entry.hash) != 1 {
		return Principal{}, refused("mismatch")
	}
	now := a.now()
	if entry.revokedAt != nil {
		return Principal{}, refused("revoked")
	}
	if entry.expiresAt != nil && !now.Before(*entry.expiresAt) {
		return Principal{}, refused("expired")
	}
	if entry.tenantDisabled {
		return Principal{}, ErrTenantDisabled
	}
	a.touch(ctx, id, entry, now)
	return Principal{TenantID: entry.tenant, TokenID: id.String(), Scopes: entry.scopes}, nil
}

// lookup returns the token's row as read within the cache TTL. Unknown ids are remembered apart, for
// the TTL too, so a repeated made-up id costs no query and a flood of them evicts no real token.
func (a *Authenticator) lookup(ctx context.Context, id uuid.UUID) (cachedToken, error) {
	now := a.now()
	a.mu.Lock()
	if e, ok := a.tokens[id]; ok && now.Sub(e.fetched) < a.ttl {
		entry := *e
		a.mu.Unlock()
		return entry, nil
	}
	if at, ok := a.unknown[id]; ok && now.Sub(at) < a.ttl {
		a.mu.Unlock()
		return cachedToken{fetched: at}, nil
	}
	a.mu.Unlock()
	e := cachedToken{found: true, fetched: now}
	var scopes string
	var lastUsed *time.Time
	err := a.db.QueryRowContext(ctx, `SELECT t.hash, t.tenant_id, t.scopes::text, t.expires_at, t.revoked_at, t.last_used_at,
			n.disabled_at IS NOT NULL
		FROM api_tokens t JOIN tenants n ON n.id = t.tenant_id WHERE t.id = $1`, id).
		Scan(&e.hash, &e.tenant, &scopes, &e.expiresAt, &e.revokedAt, &lastUsed, &e.tenantDisabled)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		a.mu.Lock()
		delete(a.tokens, id) // deleted by hand since it was read
		a.rememberUnknown(id, now)
		a.mu.Unlock()
		return cachedToken{fetched: now}, nil
	case err != nil:
		return cachedToken{}, err
	}
	e.scopes = parseScopeArray(scopes)
	if lastUsed != nil {
		e.lastUsed = *lastUsed
	}
	a.mu.Lock()
	delete(a.unknown, id)
	if old, ok := a.tokens[id]; ok && old.lastUsed.After(e.lastUsed) {
		e.lastUsed = old.lastUsed
	}
	if len(a.tokens) >= maxCachedTokens {
		clear(a.tokens) // bounded memory; only ids that exist get here
	}
	a.tokens[id] = &e
	a.mu.Unlock()
	return e, nil
}

// rememberUnknown adds id to the negative cache, first dropping expired entries when it is full,
// and all of them when none had expired; a.mu held.
func (a *Authenticator) rememberUnknown(id uuid.UUID, now time.Time) {
	if len(a.unknown) >= maxUnknownTokens {
		for k, at := range a.unknown {
			if now.Sub(at) >= a.ttl {
				delete(a.unknown, k)
			}
		}
		if len(a.unknown) >= maxUnknownTokens {
			clear(a.unknown)
		}
	}
	a.unknown[id] = now
}

// Recognizes reports, from memory only, whether token is one this replica has seen valid: a bootstrap
// token, or a stored one whose row it has read and whose secret matches. It lets an address refused
// for failed authentications keep using a real token without letting it make the database look
// up ids it invents.
func (a *Authenticator) Recognizes(token string) bool {
	if rest, ok := strings.CutPrefix(token, TokenPrefix); ok && a.db != nil {
		rawID, secret, ok := strings.Cut(rest, "_")
		id, err := uuid.Parse(rawID)
		if !ok || err != nil || len(rawID) != 32 {
			return false
		}
		a.mu.Lock()
		e, found := a.tokens[id]
		var hash []byte
		if found {
			hash = e.hash
		}
		a.mu.Unlock()
		got := sha256.Sum256([]byte(secret))
		return found && subtle.ConstantTimeCompare(got[:], hash) == 1
	}
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, d := range a.bootstrap {
		match |= subtle.ConstantTimeCompare(got[:], d[:])
	}
	return match == 1
}

// TokenCreated drops id from the negative cache: a token made through this replica is usable here at
// once, even if its id was tried before (other replicas see it within the cache TTL).
func (a *Authenticator) TokenCreated(id uuid.UUID) {
	a.mu.Lock()
	delete(a.unknown, id)
	a.mu.Unlock()
}

// touch records the use at most once a minute per token, in the background: the request does not
// wait for the write. Across replicas the UPDATE's condition keeps it to one write a minute as well.
func (a *Authenticator) touch(ctx context.Context, id uuid.UUID, entry cachedToken, now time.Time) {
	if now.Sub(entry.lastUsed) < lastUsedEvery {
		return
	}
	a.mu.Lock()
	e, ok := a.tokens[id]
	if !ok || now.Sub(e.lastUsed) < lastUsedEvery {
		a.mu.Unlock()
		return
	}
	e.lastUsed = now
	a.mu.Unlock()
	a.touches.Go(func() {
		// Not cancelled with the request, but bounded: a slow database must not pile these up.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		a.recordUse(ctx, id)
	})
}

// writeLastUsed stores the use; a failure only loses the timestamp.
func (a *Authenticator) writeLastUsed(ctx context.Context, id uuid.UUID) {
	_, _ = a.db.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = now()
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= now() - interval '1 minute')`, id)
}

func (a *Authenticator) tenantDisabled(ctx context.Context, id uuid.UUID) (bool, error) {
	now := a.now()
	a.mu.Lock()
	c, ok := a.tenants[id]
	a.mu.Unlock()
	if ok && now.Sub(c.fetched) < a.ttl {
		return c.disabled, nil
	}
	var disabled bool
	err := a.db.QueryRowContext(ctx, `SELECT disabled_at IS NOT NULL FROM tenants WHERE id = $1`, id).Scan(&disabled)
	if errors.Is(err, sql.ErrNoRows) {
		disabled = true // a default tenant removed by hand admits nobody
	} else if err != nil {
		return false, err
	}
	a.mu.Lock()
	a.tenants[id] = cachedTenant{disabled: disabled, fetched: now}
	a.mu.Unlock()
	return disabled, nil
}

// Forget drops what this replica remembers, so a change made through it applies here at once
// (other replicas see it within the cache TTL).
func (a *Authenticator) Forget() {
	a.mu.Lock()
	clear(a.tokens)
	clear(a.unknown)
	clear(a.tenants)
	a.mu.Unlock()
}
