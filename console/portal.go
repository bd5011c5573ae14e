package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database"
)

// A portal link opens the console for one tenant's customer. Its string is base64url(id ‖ mac), the
// mac an HMAC-SHA256 under PORTAL_LINK_KEY over the link's row (tenant, expiry, rights, event
// types), so a link cannot be made, lengthened or widened without the key, and the row decides
// whether it was revoked or used.
const (
	linkMACBytes = 32
	linkBytes    = 16 + linkMACBytes
	// MaxPortalLinkLifetime bounds expires_in: a link is a bearer credential in a URL.
	MaxPortalLinkLifetime = 30 * 24 * time.Hour
	// DefaultPortalLinkLifetime is a link's lifetime when none is asked for.
	DefaultPortalLinkLifetime = 24 * time.Hour
	// PortalPath is where a link opens.
	PortalPath = Prefix + "/portal/"
	// MinPortalLinkKeyBytes is the shortest PORTAL_LINK_KEY accepted.
	MinPortalLinkKeyBytes = 32
)

// ErrPortalNotConfigured is a link asked for while PORTAL_LINK_KEY is unset.
var ErrPortalNotConfigured = apperr.StateConflict("portal_not_configured",
	"portal links need PORTAL_LINK_KEY on every replica (docs/portal.md)")

// PortalLink is a link as the API and the CLI show it; URL is set on create only.
type PortalLink struct {
	ID         uuid.UUID  `json:"id"`
	TenantID   uuid.UUID  `json:"tenant_id"`
	Name       string     `json:"name"`
	EventTypes []string   `json:"event_types" doc:"the event type patterns the customer may subscribe to and see; empty = every one"`
	ReadOnly   bool       `json:"read_only"`
	Once       bool       `json:"once" doc:"the link opens one session; opening it again is refused"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	UsedAt     *time.Time `json:"used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	URL        string     `json:"url,omitempty" secret:"true" doc:"the link to hand the customer: shown only in the answer to create; a replay under the same Idempotency-Key leaves it out (Idempotent-Redacted: url)"`
}

// NewPortalLink is what a link is made from.
type NewPortalLink struct {
	Tenant     string // name or id
	Name       string
	EventTypes []string
	ReadOnly   bool
	Once       bool
	ExpiresIn  time.Duration // 0 = DefaultPortalLinkLifetime
	// Within, when set, is the only tenant the link may be for: another is not found.
	Within    uuid.UUID
	CreatedBy string
}

// Links mints, lists, checks and revokes portal links.
type Links struct {
	db        *sql.DB
	tokens    *auth.Store
	keys      [][]byte // the first signs, every one verifies
	publicURL string
}

// NewLinks returns the links of db, signed with keys (none: links cannot be made or opened).
func NewLinks(db *database.DB, tokens *auth.Store, keys []string, publicURL string) (*Links, error) {
	l := &Links{db: db.SQL(), tokens: tokens, publicURL: strings.TrimRight(publicURL, "/")}
	for _, k := range keys {
		if len(k) < MinPortalLinkKeyBytes {
			return nil, fmt.Errorf("console: a portal link key must be at least %d bytes", MinPortalLinkKeyBytes)
		}
		l.keys = append(l.keys, []byte(k))
	}
	return l, nil
}

// ParsePortalLinkKeys reads PORTAL_LINK_KEY: comma-separated keys of at least 32 bytes, the first signing.
func ParsePortalLinkKeys(raw string) ([]string, error) {
	var keys []string
	for k := range strings.SplitSeq(raw, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if len(k) < MinPortalLinkKeyBytes {
			return nil, fmt.Errorf("each key must be at least %d bytes (openssl rand -base64 32)", MinPortalLinkKeyBytes)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func (l *Links) mac(key []byte, link PortalLink) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("keelson portal link v1\x00"))
	m.Write(link.ID[:])
	m.Write(link.TenantID[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(link.ExpiresAt.UnixMicro())) //nolint:gosec // a time after 1970
	m.Write(b[:])
	flags := byte(0)
	if link.ReadOnly {
		flags |= 1
	}
	if link.Once {
		flags |= 2
	}
	m.Write([]byte{flags})
	for _, t := range link.EventTypes {
		m.Write([]byte("\x00" + t))
	}
	return m.Sum(nil)
}

func (l *Links) linkString(link PortalLink) string {
	return base64.RawURLEncoding.EncodeToString(append(link.ID[:], l.mac(l.keys[0], link)...))
}

// Create stores a link and returns it with its URL, which is never shown again. Every check runs
// before the insert, so a refused request writes nothing.
func (l *Links) Create(ctx context.Context, in NewPortalLink) (PortalLink, error) {
	if len(l.keys) == 0 {
		return PortalLink{}, ErrPortalNotConfigured
	}
	var v apperr.Validator
	v.Check(strings.TrimSpace(in.Tenant) != "", "tenant", "is required")
	v.Check(len(in.Name) <= 200, "name", "at most 200 characters")
	v.Check(in.ExpiresIn >= 0 && in.ExpiresIn <= MaxPortalLinkLifetime, "expires_in", "between 1 second and 30 days (720h)")
	v.Check(in.ExpiresIn == 0 || in.ExpiresIn >= time.Second, "expires_in", "between 1 second and 30 days (720h)")
	types := []string{}
	if len(in.EventTypes) > 0 {
		norm, err := webhooks.NormalizePatterns(in.EventTypes)
		v.Check(err == nil, "event_types", fmt.Sprint(err))
		types = norm
	}
	if err := v.Err(); err != nil {
		return PortalLink{}, err
	}
	tenant, err := l.tokens.Tenant(ctx, in.Tenant)
	if err == nil && in.Within != uuid.Nil && tenant.ID != in.Within {
		err = apperr.NotFound("tenant", in.Tenant)
	}
	if err != nil {
		return PortalLink{}, err
	}
	lifetime := in.ExpiresIn
	if lifetime == 0 {
		lifetime = DefaultPortalLinkLifetime
	}
	now := database.Now()
	link := PortalLink{ID: uuid.Must(uuid.NewV7()), TenantID: tenant.ID, Name: in.Name, EventTypes: types,
		ReadOnly: in.ReadOnly, Once: in.Once, CreatedBy: in.CreatedBy, CreatedAt: now,
		ExpiresAt: now.Add(lifetime).UTC().Truncate(time.Microsecond)}
	if _, err := l.db.ExecContext(ctx, `INSERT INTO portal_links
		(id, tenant_id, name, event_types, read_only, once, created_by, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, link.ID, link.TenantID, link.Name, textArray(types),
		link.ReadOnly, link.Once, link.CreatedBy, link.CreatedAt, link.ExpiresAt); err != nil {
		return PortalLink{}, fmt.Errorf("console: create portal link: %w", err)
	}
	link.URL = l.publicURL + PortalPath + l.linkString(link)
	return link, nil
}

// textArray is a PostgreSQL text[] literal of validated patterns (letters, digits, "_", "-", "." and "*").
func textArray(items []string) string { return "{" + strings.Join(items, ",") + "}" }

func parseTextArray(raw string) []string {
	raw = strings.Trim(raw, "{}")
	if raw == "" {
		return []string{}
	}
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		parts[i] = strings.Trim(p, `"`)
	}
	return parts
}

const linkColumns = `id, tenant_id, name, event_types::text, read_only, once, created_by, created_at, expires_at, used_at, revoked_at`

func scanLink(row interface{ Scan(...any) error }) (PortalLink, error) {
	var link PortalLink
	var types string
	err := row.Scan(&link.ID, &link.TenantID, &link.Name, &types, &link.ReadOnly, &link.Once, &link.CreatedBy,
		&link.CreatedAt, &link.ExpiresAt, &link.UsedAt, &link.RevokedAt)
	link.EventTypes = parseTextArray(types)
	link.CreatedAt, link.ExpiresAt = link.CreatedAt.UTC(), link.ExpiresAt.UTC()
	link.UsedAt, link.RevokedAt = utcPtr(link.UsedAt), utcPtr(link.RevokedAt)
	return link, err
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// List returns up to limit links of tenant (uuid.Nil = every tenant's) after the id after, oldest first.
func (l *Links) List(ctx context.Context, tenant, after uuid.UUID, limit int) ([]PortalLink, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT `+linkColumns+` FROM portal_links
		WHERE ($1 = '00000000-0000-0000-0000-000000000000'::uuid OR tenant_id = $1) AND id > $2 ORDER BY id LIMIT $3`,
		tenant, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PortalLink
	for rows.Next() {
		link, err := scanLink(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, link)
	}
	return out, rows.Err()
}

// Revoke revokes link id of tenant (uuid.Nil = any tenant) and ends every session it opened, on every
// replica at once, and revokes the API tokens they were given. Revoking twice keeps
// the first time; another tenant's link is not found.
func (l *Links) Revoke(ctx context.Context, tenant, id uuid.UUID) (PortalLink, error) {
	link, err := scanLink(l.db.QueryRowContext(ctx, `UPDATE portal_links SET revoked_at = coalesce(revoked_at, now())
		WHERE id = $1 AND ($2 = '00000000-0000-0000-0000-000000000000'::uuid OR tenant_id = $2)
		RETURNING `+linkColumns, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return PortalLink{}, apperr.NotFound("portal link", id.String())
	}
	if err != nil {
		return PortalLink{}, err
	}
	// The sessions' rows stay until they expire, so a customer still in the portal is told it ended;
	// none opens again (the link is checked at every request), and their API tokens stop now.
	tokens, err := l.sessionTokens(ctx, id)
	if err != nil {
		return PortalLink{}, err
	}
	for _, tok := range tokens {
		if _, err := l.tokens.RevokeToken(ctx, link.TenantID, tok); err != nil && !errors.Is(err, apperr.ErrNotFound) {
			return PortalLink{}, err
		}
	}
	return link, nil
}

// sessionTokens are the API tokens of the sessions link opened.
func (l *Links) sessionTokens(ctx context.Context, link uuid.UUID) ([]uuid.UUID, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT api_token_id FROM console_sessions WHERE portal_link_id = $1`, link)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var tokens []uuid.UUID
	for rows.Next() {
		var tok uuid.NullUUID
		if err := rows.Scan(&tok); err != nil {
			return nil, err
		}
		if tok.Valid {
			tokens = append(tokens, tok.UUID)
		}
	}
	return tokens, rows.Err()
}

// Why a link does not open; each is a page of its own, none says more than it must.
var (
	errLinkInvalid = errors.New("console: portal link invalid")
	errLinkExpired = errors.New("console: portal link expired")
	errLinkRevoked = errors.New("console: portal link revoked")
	errLinkUsed    = errors.New("console: portal link used")
)

// check returns the live link a link string names, or why it does not open.
func (l *Links) check(ctx context.Context, raw string) (PortalLink, error) {
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) != linkBytes || len(l.keys) == 0 {
		return PortalLink{}, errLinkInvalid
	}
	id := uuid.UUID(b[:16])
	link, err := scanLink(l.db.QueryRowContext(ctx, `SELECT `+linkColumns+` FROM portal_links WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return PortalLink{}, errLinkInvalid
	}
	if err != nil {
		return PortalLink{}, err
	}
	if !slices.ContainsFunc(l.keys, func(k []byte) bool { return hmac.Equal(l.mac(k, link), b[16:]) }) {
		return PortalLink{}, errLinkInvalid
	}
	switch {
	case link.RevokedAt != nil:
		return PortalLink{}, errLinkRevoked
	case !time.Now().Before(link.ExpiresAt):
		return PortalLink{}, errLinkExpired
	case link.Once && link.UsedAt != nil:
		return PortalLink{}, errLinkUsed
	}
	return link, nil
}

// open checks a link string and marks it used; a once-only link opens for exactly one caller, however
// many replicas race to open it.
func (l *Links) open(ctx context.Context, raw string) (PortalLink, error) {
	link, err := l.check(ctx, raw)
	if err != nil {
		return PortalLink{}, err
	}
	res, err := l.db.ExecContext(ctx, `UPDATE portal_links SET used_at = coalesce(used_at, now())
		WHERE id = $1 AND revoked_at IS NULL AND expires_at > now() AND NOT (once AND used_at IS NOT NULL)`, link.ID)
	if err != nil {
		return PortalLink{}, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return PortalLink{}, errLinkUsed
	}
	return link, nil
}

// portalScopes are what a session opened from link may do through the API.
func portalScopes(link PortalLink) []string {
	if link.ReadOnly {
		return []string{string(auth.WebhooksRead)}
	}
	return []string{string(auth.WebhooksRead), string(auth.WebhooksWrite)}
}
