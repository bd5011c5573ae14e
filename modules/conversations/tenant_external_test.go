package conversations_test

import (
	"context"

	"github.com/keelson/keelson/platform/tenancy"
)

// tenantContext is what a request of the bootstrap token carries: acting for the default tenant.
func tenantContext() context.Context { return tenancy.With(context.Background(), tenancy.DefaultID) }
