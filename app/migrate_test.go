package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/keelson/keelson/platform/database/dbtest"
)

// Two processes migrating one database at once, on a machine where it does not exist yet: both succeed,
// the schema is applied once, and a third run finds nothing to do.
func TestMigrateCreatesTheDatabaseAndIsSafeToRunConcurrently(t *testing.T) {
	name := fmt.Sprintf("keelson_migrate_%d", time.Now().UnixNano())
	u, err := url.Parse(dbtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	t.Setenv("DATABASE_URL", u.String())
	t.Cleanup(func() {
		admin, err := sql.Open("pgx", dbtest.AdminURL())
		if err == nil {
			_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			_ = admin.Close()
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = run(ctx, []string{"migrate"}, &bytes.Buffer{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrate #%d: %v", i, err)
		}
	}
	if err := run(ctx, []string{"migrate"}, &bytes.Buffer{}); err != nil {
		t.Fatalf("second migrate: %v", err)
	}

	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var applied int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations_platform WHERE version_id > 0").Scan(&applied); err != nil {
		t.Fatal(err)
	}
	var files int
	if err := db.QueryRowContext(ctx, "SELECT count(DISTINCT version_id) FROM schema_migrations_platform WHERE version_id > 0").Scan(&files); err != nil {
		t.Fatal(err)
	}
	if applied == 0 || applied != files {
		t.Fatalf("each platform migration must be recorded once: %d rows for %d versions", applied, files)
	}
}
