package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/module"
)

// migrationSets lists the platform's migrations first, then each module's in wiring order.
func migrationSets(mods []module.Module) []database.MigrationSet {
	sets := []database.MigrationSet{{Owner: "platform", FS: migrations.For("platform")}}
	for _, m := range mods {
		sets = append(sets, database.MigrationSet{Owner: m.Name(), FS: m.Migrations()})
	}
	return sets
}

func migrate(ctx context.Context, cfg Config, logger *slog.Logger) error {
	mods, err := modules(cfg)
	if err != nil {
		return err
	}
	var db *database.DB
	err = untilReachable(ctx, logger, migrateConnectWait, func() (err error) {
		// A pooler serves only the databases it names, not the maintenance database CREATE DATABASE needs.
		if !cfg.DBTransactionPool {
			if err := database.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
				return err
			}
		}
		db, err = database.Open(ctx, database.Config{URL: cfg.DatabaseURL, TransactionPooling: cfg.DBTransactionPool, MaxOpenConns: 2})
		return err
	})
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	applied, err := database.Apply(ctx, db.SQL(), migrationSets(mods), database.MigrateOptions{TableLock: cfg.DBTransactionPool})
	for _, m := range applied {
		logger.Info("migration applied", "owner", m.Owner, "version", m.Version, "file", m.File, "duration", m.Duration)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if len(applied) == 0 {
		logger.Info("migrated: the database was up to date", "modules", len(mods), "duration", time.Since(start))
		return nil
	}
	logger.Info("migrated", "applied", len(applied), "modules", len(mods), "duration", time.Since(start))
	return nil
}

// migrateConnectWait bounds how long migrate waits for the database's address to accept connections:
// a migration is started beside what it connects to (compose's pgbouncer, an operator's new cluster),
// which may not listen yet.
const migrateConnectWait = 60 * time.Second

// untilReachable runs connect until it succeeds, fails for another reason than an address that
// refuses or does not resolve yet, or wait has passed.
func untilReachable(ctx context.Context, logger *slog.Logger, wait time.Duration, connect func() error) error {
	deadline := time.Now().Add(wait)
	for {
		err := connect()
		var opErr *net.OpError
		var dnsErr *net.DNSError
		notYet := errors.As(err, &opErr) || errors.As(err, &dnsErr)
		if err == nil || !notYet || time.Now().After(deadline) {
			return err
		}
		logger.Warn("the database does not accept connections yet: retrying", "error", err.Error(), "until", deadline.Format(time.RFC3339))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}
