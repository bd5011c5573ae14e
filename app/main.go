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
	"strings"
	"syscall"

	"github.com/keelson/keelson/platform/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, errUnhealthy) {
		os.Exit(1)
	}
	if errors.Is(err, errUsage) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err != nil {
		// Fatal errors go where and how every other line goes, so a log collector parses them too.
		fatalLogger(os.Getenv, os.Stdout).Error("keelson stopped", "error", err.Error())
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: keelson migrate | serve | env | healthcheck | dlq list | dlq replay QUEUE [--limit N] | secrets reencrypt [--batch N] | tokens create|list|revoke | tenants create|list|disable|enable")

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (len(args) != 1 && args[0] != "dlq" && args[0] != "secrets" && args[0] != "tokens" && args[0] != "tenants") {
		return errUsage
	}
	if args[0] == "env" {
		printVariables(stdout)
		return nil
	}
	if args[0] == "healthcheck" {
		// Only HTTP_ADDR matters: a probe must not fail on configuration the replica never needed to reload.
		addr := strings.TrimSpace(os.Getenv("HTTP_ADDR"))
		if addr == "" {
			addr = defaultOf("HTTP_ADDR")
		}
		return healthcheck(ctx, addr, stdout)
	}
	if args[0] != "migrate" && args[0] != "serve" && args[0] != "dlq" && args[0] != "secrets" && args[0] != "tokens" && args[0] != "tenants" {
		return errUsage
	}
	cfg, err := LoadConfig(nil)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stdout)
	if args[0] == "dlq" {
		err := dlq(ctx, cfg, logger, args[1:], stdout)
		if errors.Is(err, errDLQUsage) {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return err
	}
	if args[0] == "secrets" {
		err := secretsCommand(ctx, cfg, logger, args[1:], stdout)
		if errors.Is(err, errSecretsUsage) {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return err
	}
	if args[0] == "tokens" || args[0] == "tenants" {
		command, usage := tokens, errTokensUsage
		if args[0] == "tenants" {
			command, usage = tenants, errTenantsUsage
		}
		err := command(ctx, cfg, args[1:], stdout)
		if errors.Is(err, usage) {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return err
	}
	if args[0] == "migrate" {
		return migrate(ctx, cfg, logger)
	}
	return serve(ctx, cfg, logger)
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	return telemetry.NewLogger(w, cfg.LogFormat, cfg.LogLevel)
}

// fatalLogger writes in LOG_FORMAT even when the configuration itself is what failed.
func fatalLogger(getenv func(string) string, w io.Writer) *slog.Logger {
	format := "json"
	if strings.TrimSpace(getenv("LOG_FORMAT")) == "text" {
		format = "text"
	}
	return telemetry.NewLogger(w, format, slog.LevelInfo)
}
