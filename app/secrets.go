package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

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
