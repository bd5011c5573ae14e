package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/outbox"
	"github.com/keelson/keelson/platform/tenancy"
)

var defaultTenant = tenancy.DefaultID

// TokenPrefix starts every stored token's string: kt_<id>_<secret>.
const TokenPrefix = "kt_"

// MaxTokenLifetime bounds --expires and expires_in.
const MaxTokenLifetime = 5 * 365 * 24 * time.Hour

// Store keeps tokens and tenants. It speaks SQL directly: tokens are looked up before any tenant is
// known, and the tenants table is what the tenant filter itself depends on.
type Store struct {
	db     *sql.DB
	units  *database.DB      // the unit of work enabling a tenant publishes tenant.enabled in
	events *outbox.Publisher // tenancy.EventEnabled
}

// NewStore returns the store on db.
func NewStore(db *database.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("auth: nil DB")
	}
	events, err := outbox.NewPublisher(db, nil) // tenant events wait for a relay's next poll: commands write them too
	if err != nil {
		return nil, err
	}
	return &Store{db: db.SQL(), units: db, events: events}, nil
}

// Tenant is one customer of the deployment.
type Tenant struct {
	ID         uuid.UUID
	Name       string
	DisabledAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Token is a stored token, without its secret.
type Token struct {
	ID         uuid.UUID
	TenantID   uuid.UUID
	Name       string
	Scopes     []Scope
	CreatedAt  time.Time
	LastUsedAt *time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
}

// NewToken is what a token is created from.
type NewToken struct {
	Tenant    string // name or id
	Name      string
	Scopes    []string
	ExpiresIn time.Duration // 0 = never expires
	// Within, when set, is the only tenant the token may be for: another is not found, whether it exists or not.
	Within uuid.UUID
}

var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// CreateToken stores a token and returns it with the token string, which is never shown again.
// Every check runs before the insert, so a refused request writes nothing.
func (s *Store) CreateToken(ctx context.Context, in NewToken) (Token, string, error) {
	var v apperr.Validator
	scopes := make([]Scope, 0, len(in.Scopes))
	v.Check(len(in.Scopes) > 0, "scopes", "at least one scope is required: "+ScopeNames())
	for _, raw := range in.Scopes {
		sc := Scope(strings.TrimSpace(raw))
		v.Check(Known(sc), "scopes", fmt.Sprintf("unknown scope %q; known: %s", raw, ScopeNames()))
		if Known(sc) && !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	v.Check(len(in.Name) <= 200, "name", "at most 200 characters")
	v.Check(in.ExpiresIn >= 0 && in.ExpiresIn <= MaxTokenLifetime, "expires_in", "between 0 (never) and 5 years")
	v.Check(strings.TrimSpace(in.Tenant) != "", "tenant", "is required")
	if err := v.Err(); err != nil {
		return Token{}, "", err
	}
	tenant, err := s.Tenant(ctx, in.Tenant)
	if err == nil && in.Within != uuid.Nil && tenant.ID != in.Within {
		err = apperr.NotFound("tenant", in.Tenant)
	}
	if err != nil {
		return Token{}, "", err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return Token{}, "", err
	}
	encoded := base64.RawURLEncoding.EncodeToString(secret)
	hash := sha256.Sum256([]byte(encoded))
	t := Token{ID: uuid.Must(uuid.NewV7()), TenantID: tenant.ID, Name: in.Name, Scopes: scopes, CreatedAt: database.Now()}
	if in.ExpiresIn > 0 {
		exp := t.CreatedAt.Add(in.ExpiresIn)
		t.ExpiresAt = &exp
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO api_tokens (id, tenant_id, name, scopes, hash, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, t.ID, t.TenantID, t.Name, scopeArray(scopes), hash[:], t.CreatedAt, t.ExpiresAt)
	if err != nil {
		return Token{}, "", err
	}
	return t, TokenPrefix + strings.ReplaceAll(t.ID.String(), "-", "") + "_" + encoded, nil
}

// scopeArray is a PostgreSQL text[] literal of scopes; scopes are known names, so nothing needs quoting.
func scopeArray(scopes []Scope) string {
	names := make([]string, len(scopes))
	for i, s := range scopes {
		names[i] = string(s)
	}
	return "{" + strings.Join(names, ",") + "}"
}

func parseScopeArray(raw string) []Scope {
	raw = strings.Trim(raw, "{}")
	if raw == "" {
		return []Scope{}
	}
	parts := strings.Split(raw, ",")
	out := make([]Scope, len(parts))
	for i, p := range parts {
		out[i] = Scope(strings.Trim(p, `"`))
	}
	return out
}

const tokenColumns = `id, tenant_id, name, scopes::text, created_at, last_used_at, expires_at, revoked_at` //nolint:gosec // column names, no credential

func scanToken(row interface{ Scan(...any) error }) (Token, error) {
	var t Token
	var scopes string
	err := row.Scan(&t.ID, &t.TenantID, &t.Name, &scopes, &t.CreatedAt, &t.LastUsedAt, &t.ExpiresAt, &t.RevokedAt)
	t.Scopes = parseScopeArray(scopes)
	return t, err
}

// ListTokens returns up to limit tokens after the id after (uuid.Nil = from the start), oldest
// first; tenant uuid.Nil lists every tenant's.
func (s *Store) ListTokens(ctx context.Context, tenant, after uuid.UUID, limit int) ([]Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens
		WHERE ($1 = '00000000-0000-0000-0000-000000000000'::uuid OR tenant_id = $1) AND id > $2 ORDER BY id LIMIT $3`,
		tenant, after, limit)
	return collect(rows, err, scanToken)
}

// collect scans every row of a query with scan, closing the rows.
func collect[T any](rows *sql.Rows, err error, scan func(interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken revokes token id of tenant (uuid.Nil = any tenant); revoking twice keeps the first time.
// Another tenant's token is not found.
func (s *Store) RevokeToken(ctx context.Context, tenant, id uuid.UUID) (Token, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now())
		WHERE id = $1 AND ($2 = '00000000-0000-0000-0000-000000000000'::uuid OR tenant_id = $2)
		RETURNING `+tokenColumns, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, apperr.NotFound("token", id.String())
	}
	return t, err
}

// CreateTenant stores a new, enabled tenant.
func (s *Store) CreateTenant(ctx context.Context, name string) (Tenant, error) {
	if !tenantName.MatchString(name) {
		return Tenant{}, apperr.Invalid("name", "1–63 of a-z, 0-9, _ and -, starting with a letter or digit")
	}
	now := database.Now()
	t := Tenant{ID: uuid.Must(uuid.NewV7()), Name: name, CreatedAt: now, UpdatedAt: now}
	_, err := s.db.ExecContext(ctx, `INSERT INTO tenants (id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)`, t.ID, name, now)
	if database.IsUniqueViolation(err) {
		return Tenant{}, apperr.StateConflict("tenant_exists", "a tenant named "+name+" exists")
	}
	return t, err
}

const tenantColumns = `id, name, disabled_at, created_at, updated_at`

func scanTenant(row interface{ Scan(...any) error }) (Tenant, error) {
	var t Tenant
	err := row.Scan(&t.ID, &t.Name, &t.DisabledAt, &t.CreatedAt, &t.UpdatedAt)
	return t, err
}

// Tenant finds a tenant by name or id.
func (s *Store) Tenant(ctx context.Context, ref string) (Tenant, error) {
	var row *sql.Row
	if id, err := uuid.Parse(ref); err == nil {
		row = s.db.QueryRowContext(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1`, id)
	} else {
		row = s.db.QueryRowContext(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE name = $1`, ref)
	}
	t, err := scanTenant(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Tenant{}, apperr.NotFound("tenant", ref)
	}
	return t, err
}

// ListTenants returns up to limit tenants after the id after, by id.
func (s *Store) ListTenants(ctx context.Context, after uuid.UUID, limit int) ([]Tenant, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	return collect(rows, err, scanTenant)
}

// SetTenantDisabled disables or enables the tenant named or numbered ref; disabling twice keeps the
// first time. Enabling a disabled tenant publishes tenancy.EventEnabled with the change, so the work
// that waited for it (webhook deliveries) resumes at once on whichever replica consumes it.
func (s *Store) SetTenantDisabled(ctx context.Context, ref string, disabled bool) (Tenant, error) {
	t, err := s.Tenant(ctx, ref)
	if err != nil {
		return Tenant{}, err
	}
	err = s.units.WithTx(ctx, func(ctx context.Context) error {
		conn := s.units.Conn(ctx).Statement.ConnPool
		var was bool
		// NO KEY UPDATE serializes two enablings yet leaves the tenant's foreign key checks (KEY SHARE) unblocked.
		if err := conn.QueryRowContext(ctx, `SELECT disabled_at IS NOT NULL FROM tenants WHERE id = $1 FOR NO KEY UPDATE`, t.ID).Scan(&was); err != nil {
			return err
		}
		t, err = scanTenant(conn.QueryRowContext(ctx, `UPDATE tenants
			SET disabled_at = CASE WHEN $2 THEN coalesce(disabled_at, now()) END, updated_at = now()
			WHERE id = $1 RETURNING `+tenantColumns, t.ID, disabled))
		if err != nil || disabled || !was {
			return err
		}
		e, err := messaging.NewEvent(tenancy.With(ctx, t.ID), tenancy.EventSource, tenancy.EventEnabled,
			tenancy.EnabledPayload{TenantID: t.ID, EnabledAt: t.UpdatedAt})
		if err != nil {
			return err
		}
		return s.events.Publish(ctx, e)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Tenant{}, apperr.NotFound("tenant", ref)
	}
	if err != nil {
		return Tenant{}, fmt.Errorf("auth: set tenant %s disabled=%t: %w", ref, disabled, err)
	}
	return t, nil
}
