package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for the maintenance connection
)

// EnsureDatabase creates the database named in rawURL when it does not exist yet, so a fresh
// machine needs no createdb step. A concurrent creator winning the race is not an error.
func EnsureDatabase(ctx context.Context, rawURL string) error {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return fmt.Errorf("database: parse url: %w", err)
	}
	name := cfg.Database
	if name == "" || name == "postgres" {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("database: parse url: %w", err)
	}
	u.Path = "/postgres"
	admin, err := sql.Open("pgx", u.String())
	if err != nil {
		return fmt.Errorf("database: open maintenance connection: %w", err)
	}
	defer admin.Close()

	var exists bool
	if err := admin.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("database: look up %s: %w", name, err)
	}
	if exists {
		return nil
	}
	quoted := `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+quoted); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == codeUniqueViolation) {
			return nil
		}
		return fmt.Errorf("database: create %s: %w", name, err)
	}
	return nil
}
