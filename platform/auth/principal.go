// Package auth answers who a request acts for: API tokens (a tenant and scopes, stored as a hash),
// the bootstrap API_TOKENS, tenants, and the per-token request rate limit shared by every replica.
package auth

import (
	"context"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// Scope is one permission a token carries: a module and a verb, or admin.
type Scope string

// The scopes; a route declares the one it needs.
const (
	WebhooksRead       Scope = "webhooks:read"
	WebhooksWrite      Scope = "webhooks:write"
	ConversationsRead  Scope = "conversations:read"
	ConversationsWrite Scope = "conversations:write"
	ProposalsDecide    Scope = "proposals:decide"
	// Admin manages tokens (of its own tenant; of every tenant for the default tenant's tokens) and,
	// in the default tenant only, tenants.
	Admin Scope = "admin"
)

// AllScopes are every scope, in the order documents list them; bootstrap tokens carry all of them.
var AllScopes = []Scope{WebhooksRead, WebhooksWrite, ConversationsRead, ConversationsWrite, ProposalsDecide, Admin}

// Known reports whether s is one of AllScopes.
func Known(s Scope) bool { return slices.Contains(AllScopes, s) }

// ScopeNames lists AllScopes as strings, for messages and documents.
func ScopeNames() string {
	names := make([]string, len(AllScopes))
	for i, s := range AllScopes {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Principal is who a request acts for.
type Principal struct {
	TenantID uuid.UUID
	// TokenID is the api_tokens id, or "bootstrap-<n>" for the n-th of API_TOKENS.
	TokenID string
	Scopes  []Scope
}

// Has reports whether p carries scope s.
func (p Principal) Has(s Scope) bool { return slices.Contains(p.Scopes, s) }

// Operator reports whether p administers the whole deployment: admin in the default tenant.
func (p Principal) Operator() bool { return p.Has(Admin) && p.TenantID == defaultTenant }

type principalKey struct{}

// With returns ctx acting as p.
func With(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// From returns the principal of ctx.
func From(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
