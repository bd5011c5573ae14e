package tests

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for the admin connection

	"github.com/keelson/keelson/platform/database/dbtest"
)

// emptyDatabase is a database created without any migration: the binary under test migrates it.
type emptyDatabase struct {
	Name string
	URL  string
	// Admin is a connection to the server (not to this database), for counting and fault injection.
	Admin *sql.DB
}

// newEmptyDatabase creates a fresh, empty database and drops it when the test ends.
func newEmptyDatabase(t *testing.T) *emptyDatabase {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := sql.Open("pgx", dbtest.AdminURL())
	if err != nil {
		t.Fatalf("open admin connection: %v", err)
	}
	name := "keelson_blackbox_" + randomHex(6)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		_ = admin.Close()
	})
	u, err := url.Parse(dbtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return &emptyDatabase{Name: name, URL: u.String(), Admin: admin}
}

// terminateBackends kills every server process connected to the database, as an operator or a
// failover would, and returns how many it killed.
func (d *emptyDatabase) terminateBackends(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	err := d.Admin.QueryRowContext(ctx,
		`SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		 WHERE datname = $1 AND pid <> pg_backend_pid()`, d.Name).Scan(&n)
	if err != nil {
		t.Fatalf("pg_terminate_backend: %v", err)
	}
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
