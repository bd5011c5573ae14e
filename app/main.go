// Command keelson runs the Keelson modular monolith: `migrate` applies the schema, `serve` runs the
// HTTP API, consumers, outbox forwarder, job workers and schedules in one process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "keelson:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: keelson migrate | serve | env")

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return errUsage
	}
	if args[0] == "env" {
		printVariables(stdout)
		return nil
	}
	cfg, err := LoadConfig(nil)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stdout)
	switch args[0] {
	case "migrate":
		return migrate(ctx, cfg, logger)
	case "serve":
		return serve(ctx, cfg, logger)
	default:
		return errUsage
	}
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func printVariables(w io.Writer) {
	for _, v := range Variables {
		fmt.Fprintf(w, "%s=%s\t# %s\n", v.Name, v.Default, v.Usage)
	}
}
