package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/keelson/keelson/migrations"
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

// serve on a database that was never migrated stops at once and says what to do, instead of
// failing later on a missing table.
func TestServeOnANeverMigratedDatabaseExitsAtOnceSayingToRunMigrate(t *testing.T) {
	admin, err := sql.Open("pgx", dbtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	empty := fmt.Sprintf("keelson_empty_%d", time.Now().UnixNano())
	if _, err := admin.Exec("CREATE DATABASE " + empty); err != nil {
		_ = admin.Close()
		t.Fatal(err)
	}
	// The pool closes after the drop: cleanups run once the test function has returned.
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + empty + " WITH (FORCE)")
		_ = admin.Close()
	})

	cases := map[string]string{
		"an empty database":           withDatabase(t, empty),
		"a database that is missing":  withDatabase(t, fmt.Sprintf("keelson_missing_%d", time.Now().UnixNano())),
		"only the platform's applied": dbtest.Create(t).URL,
	}
	for name, databaseURL := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", databaseURL)
			t.Setenv("HTTP_ADDR", "127.0.0.1:0")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err := run(ctx, []string{"serve"}, &bytes.Buffer{})
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "run `keelson migrate`") {
				t.Fatalf("serve = %v, want an error saying to run keelson migrate", err)
			}
			// It gives up after one schema check (well under the 2 s on a quiet machine); the
			// bound is loose for loaded CI machines, and a serve that waited would run until the 30 s context ends.
			t.Logf("serve gave up after %s", took)
			if took > 10*time.Second {
				t.Fatalf("serve took %s to give up, want under 10s", took)
			}
		})
	}
}

func withDatabase(t *testing.T, name string) string {
	t.Helper()
	u, err := url.Parse(dbtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// migrate says which migrations it applied, and that there was nothing to do on the next run.
func TestMigrateListsWhatItApplied(t *testing.T) {
	tdb := dbtest.Create(t)
	t.Setenv("DATABASE_URL", tdb.URL)
	t.Setenv("LOG_FORMAT", "json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"migrate"}, &out); err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec struct {
			Msg   string `json:"msg"`
			Owner string `json:"owner"`
			File  string `json:"file"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if rec.Msg == "migration applied" {
			files[rec.Owner+"/"+rec.File] = true
		}
	}
	if !files["webhooks/"+firstMigration(t, "webhooks")] {
		t.Fatalf("migrate did not list the webhooks module's first migration; listed %v\n%s", files, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"migrate"}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "migration applied") || !strings.Contains(out.String(), "up to date") {
		t.Fatalf("a second migrate must say the database was up to date:\n%s", out.String())
	}
}

func firstMigration(t *testing.T, owner string) string {
	t.Helper()
	entries, err := fs.ReadDir(migrations.For(owner), ".")
	if err != nil || len(entries) == 0 {
		t.Fatalf("migrations of %s: %v", owner, err)
	}
	return entries[0].Name()
}

// A migration started beside its database (compose's pgbouncer, an operator's new cluster) finds the
// address refusing connections for a moment: it waits for it rather than failing the release.
func TestMigrateWaitsForADatabaseAddressThatDoesNotListenYet(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // refused until the proxy below listens there
	admin, err := url.Parse(dbtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("keelson_migrate_wait_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dbtest.AdminURL())
		if err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			_ = db.Close()
		}
	})
	through := *admin
	through.Host, through.Path = addr, "/"+name
	t.Setenv("DATABASE_URL", through.String())

	go func() {
		time.Sleep(1500 * time.Millisecond)
		proxy, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		t.Cleanup(func() { _ = proxy.Close() })
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", admin.Host)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs bytes.Buffer
	if err := run(ctx, []string{"migrate"}, &logs); err != nil {
		t.Fatalf("migrate: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "does not accept connections yet") {
		t.Fatalf("migrate never waited:\n%s", logs.String())
	}
}
