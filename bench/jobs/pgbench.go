package main

import (
	"context"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

// pgbenchN measures the machine's write ceiling with the simple-update script on a throwaway database.
func pgbenchN(ctx context.Context, o options) (float64, error) {
	return benchenv.Pgbench(ctx, o.adminURL, nil)
}
