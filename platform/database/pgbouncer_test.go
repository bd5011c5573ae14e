package database_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

// holdServerSession begins a transaction through the pooler, so the server session most recently
// released (the pooler hands out the last one first) stays taken until the test ends.
func holdServerSession(t *testing.T, u string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "BEGIN; SELECT 1"); err != nil {
		t.Fatal(err)
	}
}

func TestThroughPgBouncerInTransactionModeThePoolsKeepNoSessionState(t *testing.T) {
	d := dbtest.CreateThroughPgBouncer(t)
	ctx := context.Background()
	const query = `SELECT count(*) FROM pg_class WHERE relname = $1`

	t.Run("without TransactionPooling a statement prepared by name is lost with its server session", func(t *testing.T) {
		db, err := database.Open(ctx, database.Config{URL: d.URL, MaxOpenConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int64
		if err := db.Gorm().Raw(query, "jobs").Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		holdServerSession(t, d.URL)
		err = db.Gorm().Raw(query, "jobs").Scan(&n).Error
		if err == nil || !strings.Contains(err.Error(), "prepared statement") {
			t.Fatalf("the cached statement ran on another server session with %v, want prepared statement … does not exist", err)
		}
	})

	t.Run("without TransactionPooling the generic-plans pool's session settings are refused", func(t *testing.T) {
		db, err := database.Open(ctx, database.Config{URL: d.URL, MaxOpenConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.WithGenericPlans(ctx, func(ctx context.Context) error { return db.Conn(ctx).Exec(`SELECT 1`).Error })
		if err == nil || !strings.Contains(err.Error(), "unsupported startup parameter") {
			t.Fatalf("the generic-plans pool connected with %v, want its startup parameters (plan_cache_mode, enable_seqscan) refused", err)
		}
	})

	t.Run("with TransactionPooling two pools share the server sessions without losing statements or settings", func(t *testing.T) {
		a, b := d.Open(t), d.Open(t)
		holdServerSession(t, d.URL)
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 40 {
			db := a
			if i%2 == 1 {
				db = b
			}
			wg.Go(func() {
				for range 20 {
					var n int64
					if err := db.Gorm().Raw(query, "jobs").Scan(&n).Error; err != nil {
						errs <- err
						return
					}
				}
				errs <- db.WithGenericPlans(ctx, func(ctx context.Context) error {
					if mode := planMode(t, db, ctx); mode != "force_generic_plan, seqscan off" {
						t.Errorf("within WithGenericPlans a statement plans in mode %q, want force_generic_plan, seqscan off", mode)
					}
					return nil
				})
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if mode := planMode(t, a, ctx); mode != "auto, seqscan on" {
			t.Fatalf("after WithGenericPlans a statement plans in mode %q, want auto, seqscan on", mode)
		}
	})

	t.Run("with a table lock two migrations at once through it apply each file once", func(t *testing.T) {
		fresh := dbtest.CreateThroughPgBouncer(t) // the platform's sets are applied; the modules' are not
		sets := migrations.Sets("webhooks", "conversations", "proposals")
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		applied := make([][]database.AppliedMigration, 2)
		errs := make([]error, 2)
		for i := range 2 {
			db := fresh.Open(t)
			wg.Go(func() {
				applied[i], errs[i] = database.Apply(ctx, db.SQL(), sets, database.MigrateOptions{TableLock: true})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := len(applied[0]) + len(applied[1]); got == 0 || len(applied[0]) != 0 && len(applied[1]) != 0 {
			t.Fatalf("applied %d and %d migrations, want all by one run and none by the other", len(applied[0]), len(applied[1]))
		}
	})
}
