package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/secrets"
	"github.com/keelson/keelson/platform/telemetry"
)

var errSecretsUsage = errors.New("usage: keelson secrets reencrypt [--batch N]")

// defaultResealBatch bounds the rows one transaction rewrites (and keeps locked).
const defaultResealBatch = 500

// secretsCommand runs `keelson secrets reencrypt`: every value the modules store sealed (module
// Registry.SealedData) is rewritten under the first key of KEELSON_ENCRYPTION_KEYS, plaintext stored
// before keys were set included, in batches until none is left.
func secretsCommand(ctx context.Context, cfg Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keelson secrets reencrypt", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	batch := fs.Int("batch", defaultResealBatch, "rows rewritten per transaction")
	if len(args) == 0 || args[0] != "reencrypt" || fs.Parse(args[1:]) != nil || fs.NArg() != 0 || *batch <= 0 {
		return errSecretsUsage
	}
	if !cfg.Secrets.Enabled() {
		return errors.New("secrets reencrypt: KEELSON_ENCRYPTION_KEYS is not set: there is no key to seal with")
	}
	mods, err := modules(cfg)
	if err != nil {
		return err
	}
	db, err := openForCommand(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	replica, err := newReplica(cfg, logger, db, mods, telemetry.Tracing{}, nil) // declares, runs nothing
	if err != nil {
		return err
	}
	// Values resealed under a key a running replica lacks would fail there: the key goes to every
	// replica (as a further key) before it seals anything.
	lacking, err := secrets.LiveWithout(ctx, db.SQL(), cfg.Secrets.CurrentKeyID(), "")
	if err != nil {
		return fmt.Errorf("secrets reencrypt: %w", err)
	}
	if len(lacking) > 0 {
		return fmt.Errorf("secrets reencrypt: refused: running replica(s) %s do not hold key %s, so could not open what it would seal; "+
			"add %s to KEELSON_ENCRYPTION_KEYS on every replica and restart them first (docs/operations.md#encryption-keys)",
			strings.Join(lacking, ", "), cfg.Secrets.CurrentKeyID(), cfg.Secrets.CurrentKeyID())
	}
	for _, rs := range replica.Registry.Resealers() {
		total := 0
		for {
			n, err := rs.Reseal(ctx, *batch)
			total += n
			if err != nil {
				fmt.Fprintf(stdout, "%s: %d row(s) rewritten under key %s before the error\n", rs.Name, total, cfg.Secrets.CurrentKeyID())
				return fmt.Errorf("secrets reencrypt: %s: %w", rs.Name, err)
			}
			if n == 0 {
				break
			}
		}
		fmt.Fprintf(stdout, "%s: %d row(s) rewritten under key %s\n", rs.Name, total, cfg.Secrets.CurrentKeyID())
	}
	return nil
}

// checkKeyring is a serving replica's start-up check of its KEELSON_ENCRYPTION_KEYS: it must hold
// every key a stored value is sealed under (or it would take deliveries and fail them), and every
// live replica must hold the key it seals with (or they could not open what it writes).
func checkKeyring(ctx context.Context, cfg Config, db *database.DB, reg *module.Registry) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, rs := range reg.Resealers() {
		if rs.KeyIDs == nil {
			continue
		}
		ids, err := rs.KeyIDs(ctx)
		if err != nil {
			return fmt.Errorf("check sealed values of %s: %w", rs.Name, err)
		}
		if missing := cfg.Secrets.Missing(ids); len(missing) > 0 {
			return fmt.Errorf("KEELSON_ENCRYPTION_KEYS lacks key(s) %s, under which %s values are sealed: this replica could not open them; "+
				"give it every key the other replicas hold (docs/operations.md#encryption-keys)", strings.Join(missing, ", "), rs.Name)
		}
	}
	if !cfg.Secrets.Enabled() {
		return nil
	}
	lacking, err := secrets.LiveWithout(ctx, db.SQL(), cfg.Secrets.CurrentKeyID(), cfg.InstanceID)
	if err != nil {
		return err
	}
	if len(lacking) > 0 {
		return fmt.Errorf("KEELSON_ENCRYPTION_KEYS seals with key %s, which running replica(s) %s do not hold, so could not open what this one writes; "+
			"add %s to their keys (after the one that seals) and restart them first, or put it second here (docs/operations.md#encryption-keys)",
			cfg.Secrets.CurrentKeyID(), strings.Join(lacking, ", "), cfg.Secrets.CurrentKeyID())
	}
	return nil
}
