package database

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"regexp"

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

// Migrate applies every pending migration of every set, in order. A PostgreSQL session lock
// serialises concurrent runs, so two processes migrating at once is safe and the second finds nothing to do.
func Migrate(ctx context.Context, db *sql.DB, sets []MigrationSet) error {
	for _, set := range sets {
		if set.FS == nil {
			continue
		}
		if !ownerPattern.MatchString(set.Owner) {
			return fmt.Errorf("migrate: invalid owner name %q", set.Owner)
		}
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return fmt.Errorf("migrate %s: %w", set.Owner, err)
		}
		provider, err := goose.NewProvider(goose.DialectPostgres, db, set.FS,
			goose.WithTableName("schema_migrations_"+set.Owner),
			goose.WithSessionLocker(locker),
			goose.WithDisableGlobalRegistry(true),
		)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", set.Owner, err)
		}
		if _, err := provider.Up(ctx); err != nil {
			return fmt.Errorf("migrate %s: %w", set.Owner, err)
		}
	}
	return nil
}
