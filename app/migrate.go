package main

import (
	"context"
	"fmt"
	"log/slog"
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
	// A pooler serves only the databases it names, not the maintenance database CREATE DATABASE needs.
	if !cfg.DBTransactionPool {
		if err := database.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
	}
	db, err := database.Open(ctx, database.Config{URL: cfg.DatabaseURL, TransactionPooling: cfg.DBTransactionPool, MaxOpenConns: 2})
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
