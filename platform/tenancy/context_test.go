package tenancy

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
)

func TestRequireNamesTheTenantOfTheContextOrFailsWithErrNoTenant(t *testing.T) {
	id := uuid.New()
	if got, err := Require(With(context.Background(), id)); err != nil || got != id {
		t.Fatalf("Require = %v, %v; want %v", got, err, id)
	}
	for _, ctx := range []context.Context{context.Background(), System(context.Background(), "sweep"), With(context.Background(), uuid.Nil)} {
		if _, err := Require(ctx); !errors.Is(err, ErrNoTenant) {
			t.Fatalf("Require without a tenant: %v, want ErrNoTenant", err)
		}
	}
}
