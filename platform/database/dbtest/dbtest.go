// Package dbtest gives each test its own PostgreSQL database, migrated and dropped afterwards.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for the admin connection

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/database"
)

// AdminURL is the server used to create and drop test databases (TEST_DATABASE_URL overrides it).
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// Database is a fresh database that lives as long as the test.
type Database struct {
	Name string
	URL  string
	// TransactionPooling: URL reaches the database through PgBouncer in transaction mode.
	TransactionPooling bool
}

// Create makes a new database, applies the platform's migrations and then the sets it is given
// (a module's Migrations(), or migrations.Sets for the shipped modules), and drops it when the test ends.
// With PgBouncerEnv set, its URL goes through PgBouncer (CreateThroughPgBouncer).
func Create(t testing.TB, sets ...database.MigrationSet) *Database {
	t.Helper()
	if Pooled() {
		return CreateThroughPgBouncer(t, sets...)
	}
	return createDirect(t, sets...)
}

func createDirect(t testing.TB, sets ...database.MigrationSet) *Database {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin, err := sql.Open("pgx", AdminURL())
	if err != nil {
		t.Fatalf("dbtest: open admin: %v", err)
	}
	defer admin.Close()

	name := "keelson_test_" + randomHex(6)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("dbtest: create %s: %v", name, err)
	}
	t.Cleanup(func() { drop(name) })

	u, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("dbtest: parse admin url: %v", err)
	}
	u.Path = "/" + name
	d := &Database{Name: name, URL: u.String()}

	all := append([]database.MigrationSet{{Owner: "platform", FS: migrations.For("platform")}}, sets...)
	db := d.Open(t)
	if err := database.Migrate(ctx, db.SQL(), all); err != nil {
		t.Fatalf("dbtest: migrate %s: %v", name, err)
	}
	return d
}

// Open returns a new connection pool on the database, closed when the test ends.
// Two pools stand for two replicas.
func (d *Database) Open(t testing.TB) *database.DB {
	t.Helper()
	return d.OpenTraced(t, nil)
}

// OpenTraced is Open with a tracer that sees every statement of the pool (nil: none).
func (d *Database) OpenTraced(t testing.TB, tracer pgx.QueryTracer) *database.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := database.Open(ctx, database.Config{URL: d.URL, MaxOpenConns: 20, Tracer: tracer, TransactionPooling: d.TransactionPooling})
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", d.Name, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// New is Create followed by Open: the common case of one pool on a fresh database.
func New(t testing.TB, sets ...database.MigrationSet) *database.DB {
	t.Helper()
	return Create(t, sets...).Open(t)
}

// Tenant adds a tenant named name beside the default one and returns its id.
func Tenant(t testing.TB, db *database.DB, name string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	if err := db.Gorm().Exec(`INSERT INTO tenants (id, name) VALUES (?, ?)`, id, name).Error; err != nil {
		t.Fatalf("create tenant %s: %v", name, err)
	}
	return id
}

func drop(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := sql.Open("pgx", AdminURL())
	if err != nil {
		return
	}
	defer admin.Close()
	_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
