package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// MigrationSet is one owner's migrations: the platform's or a module's.
// Each owner keeps its own version table, so modules are added and removed independently.
type MigrationSet struct {
	Owner string
	FS    fs.FS
}

var ownerPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)

// AppliedMigration is one migration a Migrate run applied.
type AppliedMigration struct {
	Owner    string
	Version  int64
	File     string
	Duration time.Duration
}

// MigrateOptions tune Migrate and Apply.
type MigrateOptions struct {
	// TableLock serialises runs with a row in a lock table instead of a session advisory lock, which a
	// pooler in transaction mode would leave on whichever server session took it (Config.TransactionPooling).
	TableLock bool
}

// Migrate applies every pending migration of every set, in order. A PostgreSQL session lock
// serialises concurrent runs, so two processes migrating at once is safe and the second finds nothing to do.
func Migrate(ctx context.Context, db *sql.DB, sets []MigrationSet, opts ...MigrateOptions) error {
	_, err := Apply(ctx, db, sets, opts...)
	return err
}

// Apply is Migrate, returning what it applied (empty when the database was up to date).
func Apply(ctx context.Context, db *sql.DB, sets []MigrationSet, opts ...MigrateOptions) ([]AppliedMigration, error) {
	var o MigrateOptions
	for _, opt := range opts {
		o.TableLock = o.TableLock || opt.TableLock
	}
	var applied []AppliedMigration
	for _, set := range sets {
		if set.FS == nil {
			continue
		}
		if !ownerPattern.MatchString(set.Owner) {
			return applied, fmt.Errorf("migrate: invalid owner name %q", set.Owner)
		}
		locking, err := migrationLock(o)
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", set.Owner, err)
		}
		provider, err := goose.NewProvider(goose.DialectPostgres, db, set.FS,
			goose.WithTableName("schema_migrations_"+set.Owner),
			locking,
			goose.WithDisableGlobalRegistry(true),
		)
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", set.Owner, err)
		}
		results, err := provider.Up(ctx)
		for _, r := range results {
			if r.Error == nil && r.Source != nil {
				applied = append(applied, AppliedMigration{Owner: set.Owner, Version: r.Source.Version,
					File: path.Base(r.Source.Path), Duration: r.Duration})
			}
		}
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", set.Owner, err)
		}
	}
	return applied, nil
}

func migrationLock(o MigrateOptions) (goose.ProviderOption, error) {
	if o.TableLock {
		l, err := lock.NewPostgresTableLocker()
		return goose.WithLocker(l), err
	}
	l, err := lock.NewPostgresSessionLocker()
	return goose.WithSessionLocker(l), err
}

// ErrNotMigrated is returned by CheckMigrated when migrations are pending.
var ErrNotMigrated = errors.New("the database schema is not up to date: run `keelson migrate` first")

// CheckMigrated returns an error wrapping ErrNotMigrated, naming what is missing, when a migration
// of sets has not been applied. It only reads (no lock, no version table created), so it answers
// at once even on an empty database.
func CheckMigrated(ctx context.Context, db *sql.DB, sets []MigrationSet) error {
	var missing []string
	for _, set := range sets {
		if set.FS == nil {
			continue
		}
		if !ownerPattern.MatchString(set.Owner) {
			return fmt.Errorf("migrations: invalid owner name %q", set.Owner)
		}
		// ListSources only reads the files: the provider never touches db here.
		provider, err := goose.NewProvider(goose.DialectPostgres, db, set.FS,
			goose.WithTableName("schema_migrations_"+set.Owner), goose.WithDisableGlobalRegistry(true))
		if err != nil {
			return fmt.Errorf("migrations %s: %w", set.Owner, err)
		}
		applied, err := appliedVersions(ctx, db, "schema_migrations_"+set.Owner)
		if err != nil {
			return err
		}
		for _, src := range provider.ListSources() {
			if !applied[src.Version] {
				missing = append(missing, set.Owner+"/"+path.Base(src.Path))
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	const shown = 3
	list := missing
	if len(list) > shown {
		list = list[:shown]
	}
	more := ""
	if len(missing) > shown {
		more = fmt.Sprintf(" and %d more", len(missing)-shown)
	}
	return fmt.Errorf("%w (%d pending: %v%s)", ErrNotMigrated, len(missing), list, more)
}

// appliedVersions reads an owner's version table; a table that does not exist means none applied.
func appliedVersions(ctx context.Context, db *sql.DB, table string) (map[int64]bool, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return nil, fmt.Errorf("migrations: read %s: %w", table, err)
	}
	applied := map[int64]bool{}
	if !exists {
		return applied, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT version_id FROM `+table+` WHERE is_applied`) //nolint:gosec // table is built from a checked owner name
	if err != nil {
		return nil, fmt.Errorf("migrations: read %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		applied[v] = true
	}
	return applied, rows.Err()
}
