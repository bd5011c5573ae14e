package tenancy

import (
	"context"
	"errors"

	"github.com/google/uuid"
)

// DefaultID is the tenant that rows written before tenants existed, and the bootstrap API_TOKENS, belong to.
var DefaultID = uuid.MustParse("00000000-0000-0000-0000-000000000001")

// DefaultName is the default tenant's name.
const DefaultName = "default"

// ErrNoTenant is returned for a statement on tenant-scoped data made with neither a tenant nor a system context.
var ErrNoTenant = errors.New("tenancy: no tenant in context")

type tenantKey struct{}

type systemKey struct{}

// With returns ctx acting for tenant id.
func With(ctx context.Context, id uuid.UUID) context.Context {
	return context.WithValue(ctx, tenantKey{}, id)
}

// From returns the tenant ctx acts for.
func From(ctx context.Context) (uuid.UUID, bool) {
	id, ok := ctx.Value(tenantKey{}).(uuid.UUID)
	return id, ok && id != uuid.Nil
}

// Require returns the tenant ctx acts for, or ErrNoTenant: what raw SQL on tenant data writes into its
// WHERE, since the plugin scopes model-bound statements only.
func Require(ctx context.Context) (uuid.UUID, error) {
	if id, ok := From(ctx); ok {
		return id, nil
	}
	return uuid.Nil, ErrNoTenant
}

// System returns ctx for work that spans tenants; reason names it in logs and errors ("sweep", "retention").
// A tenant set in ctx still wins: System never widens a tenant's view.
func System(ctx context.Context, reason string) context.Context {
	return context.WithValue(ctx, systemKey{}, reason)
}

// SystemReason reports whether ctx is a system context, and why.
func SystemReason(ctx context.Context) (string, bool) {
	r, ok := ctx.Value(systemKey{}).(string)
	return r, ok
}
