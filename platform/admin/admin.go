// Package admin serves /api/v1/admin: tokens (scope admin; a tenant's admin tokens see only that
// tenant's, the default tenant's see every tenant's) and tenants (admin tokens of the default tenant only).
package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/tenancy"
)

// Mount declares the admin routes on api. Changes made here are forgotten by authn at once, so
// this replica applies a revocation or a disable immediately (the others within the cache TTL).
func Mount(api *httpapi.API, store *auth.Store, authn *auth.Authenticator) error {
	if store == nil || authn == nil {
		return errors.New("admin: nil store or authenticator")
	}
	h := handlers{store: store, authn: authn}
	g := api.Module("/admin", "admin").Scopes(auth.Admin, auth.Admin)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/tokens", ID: "createToken",
		Summary: "Create an API token; the answer is the only place its token string is shown.", Status: http.StatusCreated}, h.createToken)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/tokens", ID: "listTokens",
		Summary: "List API tokens (never their secrets), oldest first."}, h.listTokens)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/tokens/{id}/revoke", ID: "revokeToken",
		Summary: "Revoke an API token: refused with 401 on every replica within the cache TTL (5 s)."}, h.revokeToken)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/tenants", ID: "createTenant",
		Summary: "Create a tenant.", Status: http.StatusCreated, Errors: []int{http.StatusConflict}}, h.createTenant)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/tenants", ID: "listTenants",
		Summary: "List tenants."}, h.listTenants)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/tenants/{id}/disable", ID: "disableTenant",
		Summary: "Disable a tenant: its tokens get 403 tenant_disabled.", Errors: []int{http.StatusConflict}}, h.disableTenant)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/tenants/{id}/enable", ID: "enableTenant",
		Summary: "Enable a disabled tenant again."}, h.enableTenant)
	return nil
}

type handlers struct {
	store *auth.Store
	authn *auth.Authenticator
}

// TokenResponse is a token as the API and the CLI show it; Token is set on create only.
type TokenResponse struct {
	ID         uuid.UUID  `json:"id"`
	TenantID   uuid.UUID  `json:"tenant_id"`
	Name       string     `json:"name"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	Token      string     `json:"token,omitempty" secret:"true" doc:"kt_<id>_<secret>: shown only in the answer to create; a replay under the same Idempotency-Key leaves it out (Idempotent-Redacted: token)"`
}

// ToTokenResponse converts a stored token.
func ToTokenResponse(t auth.Token) TokenResponse {
	scopes := make([]string, len(t.Scopes))
	for i, s := range t.Scopes {
		scopes[i] = string(s)
	}
	return TokenResponse{ID: t.ID, TenantID: t.TenantID, Name: t.Name, Scopes: scopes, CreatedAt: t.CreatedAt.UTC(),
		LastUsedAt: utc(t.LastUsedAt), ExpiresAt: utc(t.ExpiresAt), RevokedAt: utc(t.RevokedAt)}
}

// TenantResponse is a tenant as the API and the CLI show it.
type TenantResponse struct {
	ID         uuid.UUID  `json:"id"`
	Name       string     `json:"name"`
	Disabled   bool       `json:"disabled"`
	DisabledAt *time.Time `json:"disabled_at"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// ToTenantResponse converts a stored tenant.
func ToTenantResponse(t auth.Tenant) TenantResponse {
	return TenantResponse{ID: t.ID, Name: t.Name, Disabled: t.DisabledAt != nil, DisabledAt: utc(t.DisabledAt),
		CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC()}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// ParseLifetime reads a token lifetime: a Go duration ("720h") or whole days ("30d"); "" = never expires.
func ParseLifetime(raw string) (time.Duration, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(raw, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, apperr.Invalid("expires_in", "a positive number of days (30d) or a duration (720h)")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		return 0, apperr.Invalid("expires_in", "a positive number of days (30d) or a duration (720h)")
	}
	return d, nil
}

// caller is the principal of ctx; the API group always sets one.
func caller(ctx context.Context) auth.Principal {
	p, _ := auth.From(ctx)
	return p
}

// visibleTenant is the tenant whose tokens the caller manages: its own, or any for the operator (uuid.Nil).
func visibleTenant(p auth.Principal) uuid.UUID {
	if p.Operator() {
		return uuid.Nil
	}
	return p.TenantID
}

type createTokenIn struct {
	Body struct {
		Tenant    string   `json:"tenant,omitempty" doc:"tenant name or id; default the caller's. Only the default tenant's admin tokens create tokens of other tenants."`
		Name      string   `json:"name,omitempty"`
		Scopes    []string `json:"scopes" nullable:"false" minItems:"1" doc:"webhooks:read, webhooks:write, conversations:read, conversations:write, proposals:decide, admin"`
		ExpiresIn string   `json:"expires_in,omitempty" doc:"lifetime: 30d or 720h; absent = never expires"`
	}
}

type tokenOut struct {
	Body TokenResponse
}

func (h handlers) createToken(ctx context.Context, in *createTokenIn) (*tokenOut, error) {
	p := caller(ctx)
	lifetime, err := ParseLifetime(in.Body.ExpiresIn)
	if err != nil {
		return nil, err
	}
	nt := auth.NewToken{Tenant: in.Body.Tenant, Name: in.Body.Name, Scopes: in.Body.Scopes, ExpiresIn: lifetime}
	if nt.Tenant == "" {
		nt.Tenant = p.TenantID.String()
	}
	if !p.Operator() {
		nt.Within = p.TenantID
	}
	tok, secret, err := h.store.CreateToken(ctx, nt)
	if err != nil {
		return nil, err
	}
	h.authn.TokenCreated(tok.ID)
	resp := ToTokenResponse(tok)
	resp.Token = secret
	return &tokenOut{Body: resp}, nil
}

type listIn struct {
	Page httpapi.Page
}

type idCursor struct {
	After uuid.UUID `json:"after"`
}

type tokenListOut struct {
	Body httpapi.List[TokenResponse]
}

func (h handlers) listTokens(ctx context.Context, in *listIn) (*tokenListOut, error) {
	tenant := visibleTenant(caller(ctx))
	items, next, err := httpapi.Paginate(in.Page, func(cur idCursor, limit int) ([]auth.Token, error) {
		return h.store.ListTokens(ctx, tenant, cur.After, limit)
	}, func(last auth.Token) idCursor { return idCursor{After: last.ID} })
	if err != nil {
		return nil, err
	}
	out := make([]TokenResponse, len(items))
	for i, t := range items {
		out[i] = ToTokenResponse(t)
	}
	return &tokenListOut{Body: httpapi.NewList(out, next)}, nil
}

func (h handlers) revokeToken(ctx context.Context, in *httpapi.ByID) (*tokenOut, error) {
	tok, err := h.store.RevokeToken(ctx, visibleTenant(caller(ctx)), in.ID)
	if err != nil {
		return nil, err
	}
	h.authn.Forget()
	return &tokenOut{Body: ToTokenResponse(tok)}, nil
}

// operatorOnly refuses tenant routes to admin tokens of any tenant but the default one.
func operatorOnly(ctx context.Context) error {
	if caller(ctx).Operator() {
		return nil
	}
	return httpapi.Forbidden(httpapi.CodeInsufficientScope, "tenants are managed with an admin token of the default tenant")
}

type createTenantIn struct {
	Body struct {
		Name string `json:"name" doc:"1–63 of a-z, 0-9, _ and -"`
	}
}

type tenantOut struct {
	Body TenantResponse
}

func (h handlers) createTenant(ctx context.Context, in *createTenantIn) (*tenantOut, error) {
	if err := operatorOnly(ctx); err != nil {
		return nil, err
	}
	t, err := h.store.CreateTenant(ctx, in.Body.Name)
	if err != nil {
		return nil, err
	}
	return &tenantOut{Body: ToTenantResponse(t)}, nil
}

type tenantListOut struct {
	Body httpapi.List[TenantResponse]
}

func (h handlers) listTenants(ctx context.Context, in *listIn) (*tenantListOut, error) {
	if err := operatorOnly(ctx); err != nil {
		return nil, err
	}
	items, next, err := httpapi.Paginate(in.Page, func(cur idCursor, limit int) ([]auth.Tenant, error) {
		return h.store.ListTenants(ctx, cur.After, limit)
	}, func(last auth.Tenant) idCursor { return idCursor{After: last.ID} })
	if err != nil {
		return nil, err
	}
	out := make([]TenantResponse, len(items))
	for i, t := range items {
		out[i] = ToTenantResponse(t)
	}
	return &tenantListOut{Body: httpapi.NewList(out, next)}, nil
}

func (h handlers) disableTenant(ctx context.Context, in *httpapi.ByID) (*tenantOut, error) {
	return h.setDisabled(ctx, in.ID, true)
}

func (h handlers) enableTenant(ctx context.Context, in *httpapi.ByID) (*tenantOut, error) {
	return h.setDisabled(ctx, in.ID, false)
}

func (h handlers) setDisabled(ctx context.Context, id uuid.UUID, disabled bool) (*tenantOut, error) {
	if err := operatorOnly(ctx); err != nil {
		return nil, err
	}
	if disabled && id == tenancy.DefaultID {
		// Its admin tokens are the only ones that could enable it again.
		return nil, apperr.StateConflict("default_tenant", "the default tenant cannot be disabled through the API")
	}
	t, err := h.store.SetTenantDisabled(ctx, id.String(), disabled)
	if err != nil {
		return nil, err
	}
	h.authn.Forget()
	return &tenantOut{Body: ToTenantResponse(t)}, nil
}
