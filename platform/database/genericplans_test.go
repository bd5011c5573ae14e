package database_test

import (
	"context"
	"testing"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

// planMode is the plan_cache_mode of the session that runs ctx's statements, and whether it may scan
// a table whole.
func planMode(t *testing.T, db *database.DB, ctx context.Context) string {
	t.Helper()
	var mode string
	err := db.Conn(ctx).Raw(`SELECT current_setting('plan_cache_mode') || ', seqscan ' || current_setting('enable_seqscan')`).Scan(&mode).Error
	if err != nil {
		t.Fatal(err)
	}
	return mode
}

func TestWithGenericPlansRunsBatchStatementsOnTheirGenericPlanOnlyWithinIt(t *testing.T) {
	db := dbtest.New(t)
	ctx := context.Background()
	const batch = `SELECT count(*) FROM unnest(CAST($1 AS int8[])) AS batch_of_ids(id)`

	t.Run("outside a unit of work, on sessions that plan every statement once, and in the units of work it opens", func(t *testing.T) {
		err := db.WithGenericPlans(ctx, func(ctx context.Context) error {
			if mode := planMode(t, db, ctx); mode != "force_generic_plan, seqscan off" {
				t.Errorf("a statement runs in plan mode %q, want force_generic_plan, seqscan off", mode)
			}
			return db.WithTx(ctx, func(ctx context.Context) error {
				for n := range 8 {
					if err := db.Conn(ctx).Exec(batch, make([]int64, n+1)).Error; err != nil {
						return err
					}
				}
				var generic, custom int64
				err := db.Conn(ctx).Raw(`SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
					FROM pg_prepared_statements WHERE statement LIKE '%batch_of_ids%'`).Row().Scan(&generic, &custom)
				if err != nil {
					return err
				}
				if generic < 8 || custom != 0 {
					t.Errorf("in a unit of work it opened: %d generic and %d custom plans, want one generic plan per execution and no custom one", generic, custom)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if mode := planMode(t, db, ctx); mode != "auto, seqscan on" {
			t.Fatalf("outside it a statement runs in plan mode %q, want auto, seqscan on", mode)
		}
	})

	t.Run("within a caller's unit of work, for the rest of that unit only", func(t *testing.T) {
		db.SQL().SetMaxOpenConns(1) // one session: the one whose setting is read after the unit of work
		err := db.WithTx(ctx, func(ctx context.Context) error {
			if mode := planMode(t, db, ctx); mode != "auto, seqscan on" {
				t.Errorf("before WithGenericPlans the unit of work plans in mode %q, want auto, seqscan on", mode)
			}
			return db.WithGenericPlans(ctx, func(ctx context.Context) error {
				if mode := planMode(t, db, ctx); mode != "force_generic_plan, seqscan off" {
					t.Errorf("within WithGenericPlans the unit of work plans in mode %q, want force_generic_plan, seqscan off", mode)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if mode := planMode(t, db, ctx); mode != "auto, seqscan on" {
			t.Fatalf("after the unit of work the session plans in mode %q, want auto, seqscan on", mode)
		}
	})
}

func TestTheGenericPlansPoolIsTakenFromTheConnectionBudget(t *testing.T) {
	url := dbtest.Create(t).URL
	for _, c := range []struct{ budget, main, generic int }{{20, 18, 2}, {5, 4, 1}, {2, 2, 0}} {
		db, err := database.Open(context.Background(), database.Config{URL: url, MaxOpenConns: c.budget})
		if err != nil {
			t.Fatal(err)
		}
		main, generic := db.SQL().Stats().MaxOpenConnections, 0
		if pool := db.GenericPlansPool(); pool != nil {
			generic = pool.Stats().MaxOpenConnections
			if open := pool.Stats().OpenConnections; open != 0 {
				t.Errorf("a budget of %d: the generic-plans pool holds %d connections before its first use, want 0", c.budget, open)
			}
		}
		_ = db.Close()
		if main != c.main || generic != c.generic {
			t.Errorf("a budget of %d connections: %d in the pool and %d for generic plans, want %d and %d", c.budget, main, generic, c.main, c.generic)
		}
	}
}
