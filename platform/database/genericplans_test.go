package database_test

import (
	"context"
	"testing"

	"github.com/keelson/keelson/platform/database/dbtest"
)

func TestWithGenericPlansRunsBatchStatementsOnTheirGenericPlanWithinItsUnitOfWorkOnly(t *testing.T) {
	db := dbtest.New(t)
	db.SQL().SetMaxOpenConns(1) // one session: its prepared statements and settings are the ones read below
	ctx := context.Background()
	const batch = `SELECT count(*) FROM unnest(CAST($1 AS int8[])) AS batch_of_ids(id)`
	plans := func() (generic, custom int64) {
		t.Helper()
		err := db.SQL().QueryRowContext(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
			FROM pg_prepared_statements WHERE statement LIKE '%batch_of_ids%'`).Scan(&generic, &custom)
		if err != nil {
			t.Fatal(err)
		}
		return generic, custom
	}

	err := db.WithGenericPlans(ctx, func(ctx context.Context) error {
		for n := range 8 {
			ids := make([]int64, n+1)
			if err := db.Conn(ctx).Exec(batch, ids).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if generic, custom := plans(); generic < 8 || custom != 0 {
		t.Fatalf("within the unit of work: %d generic and %d custom plans, want one generic plan per execution and no custom one", generic, custom)
	}

	var mode string
	if err := db.SQL().QueryRowContext(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "auto" {
		t.Fatalf("after the unit of work the session plans in mode %q, want auto", mode)
	}
}
