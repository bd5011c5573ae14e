package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/console"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/host"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/secrets"
	"github.com/keelson/keelson/platform/telemetry"
)

// serveGCPercent is the GC target of `serve` when GOGC is not set. A replica's heap is small and its
// garbage short-lived (requests, messages, batches): collecting at 4× the live heap instead of 2×
// cost about 30 MB more resident memory for a tenth less CPU per delivery (docs/performance.md).
const serveGCPercent = 400

// setServeGC applies serveGCPercent unless the operator set GOGC, and returns the percent in force.
func setServeGC(getenv func(string) string) int {
	if v := getenv("GOGC"); v != "" {
		old := debug.SetGCPercent(100)
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(serveGCPercent)
	return serveGCPercent
}

func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	mods, err := modules(cfg)
	if err != nil {
		return err
	}
	logger.Info("starting", "config", cfg, "gc_percent", setServeGC(os.Getenv))
	if !cfg.Secrets.Enabled() {
		logger.Warn("KEELSON_ENCRYPTION_KEYS is not set: secrets are stored unencrypted; set a key before production use (docs/operations.md)")
	}
	db, err := database.Open(ctx, database.Config{URL: cfg.DatabaseURL, TransactionPooling: cfg.DBTransactionPool, MaxOpenConns: cfg.DBMaxOpenConns})
	if database.IsMissingDatabase(err) {
		return fmt.Errorf("%w: %w", database.ErrNotMigrated, err)
	}
	if err != nil {
		return err
	}
	defer db.Close()
	// Without this, a never-migrated database fails later and less clearly (a schedule's missing
	// table) or not at all until the first request.
	checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = database.CheckMigrated(checkCtx, db.SQL(), migrationSets(mods))
	cancel()
	if err != nil {
		return err
	}
	tracing, err := telemetry.NewTracing(ctx, os.Getenv)
	if err != nil {
		return err
	}
	defer func() {
		// Spans of the last moments are flushed, within a bound: the collector may be gone.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(flushCtx); err != nil {
			logger.Warn("flushing spans failed", "error", err)
		}
	}()
	var lc net.ListenConfig
	var metricsListener net.Listener
	if cfg.MetricsAddr != "" {
		if metricsListener, err = lc.Listen(ctx, "tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.MetricsAddr, err)
		}
	}
	replica, err := newReplica(cfg, logger, db, mods, tracing, metricsListener)
	if err != nil {
		return err
	}
	if err := checkKeyring(ctx, cfg, db, replica.Registry); err != nil {
		return err
	}
	// Recorded until the replica stops, for the check above in others and `secrets reencrypt`.
	if err := secrets.Announce(ctx, db.SQL(), cfg.InstanceID, cfg.Secrets); err != nil {
		return err
	}
	announceCtx, stopAnnouncing := context.WithCancel(ctx)
	announced := make(chan struct{})
	go func() {
		defer close(announced)
		secrets.KeepAnnounced(announceCtx, db.SQL(), cfg.InstanceID, cfg.Secrets, func(err error) {
			logger.Warn("refreshing this replica's key ids failed", "error", err)
		})
	}()
	defer func() { stopAnnouncing(); <-announced }()
	listener, err := lc.Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	return replica.Run(ctx, listener)
}

// pages are the browser pages the replica serves beside its API.
func pages(cfg Config) []host.Pages {
	if !cfg.ConsoleEnabled {
		return nil
	}
	return []host.Pages{console.New(console.Options{SessionTTL: cfg.ConsoleSessionTTL, PortalLinkKeys: cfg.PortalLinkKeys,
		PortalPublicURL: cfg.PortalPublicURL, PortalFrameAncestors: cfg.PortalFrameAncestors})}
}

// newReplica maps the configuration onto the platform. The shutdown timeout is split so the whole stop
// (HTTP drain, in-flight handlers and jobs, in parallel) ends within it.
func newReplica(cfg Config, logger *slog.Logger, db *database.DB, mods []module.Module, tracing telemetry.Tracing, metricsListener net.Listener) (*host.Replica, error) {
	var tp trace.TracerProvider
	if tracing.Enabled {
		tp = tracing.Provider
	}
	workBound := cfg.ShutdownTimeout * 4 / 5
	return host.New(host.Options{
		DB:                 db,
		Logger:             logger,
		InstanceID:         cfg.InstanceID,
		Tokens:             cfg.APITokens,
		RateLimit:          cfg.APIRateLimit,
		RateWindow:         cfg.APIRateWindow,
		AuthFailureLimit:   cfg.AuthFailureLimit,
		AuthFailureWindow:  cfg.AuthFailureWindow,
		MetricsListener:    metricsListener,
		MetricsPprof:       cfg.MetricsPprof,
		CORSAllowedOrigins: cfg.CORSAllowedOrigins,
		TracerProvider:     tp,
		Messaging: messaging.Config{
			AMQPURL:         cfg.AMQPURL,
			Exchange:        cfg.AMQPExchange,
			QueuePrefix:     cfg.AMQPQueuePrefix,
			QueueType:       cfg.AMQPQueueType,
			PollInterval:    cfg.OutboxPollInterval,
			ShutdownTimeout: workBound,
		},
		Jobs:            jobs.Config{Workers: cfg.JobWorkers, ShutdownTimeout: workBound},
		ShutdownTimeout: cfg.ShutdownTimeout / 2,
		Background:      true,
		Pages:           pages(cfg),
		Secrets:         cfg.Secrets,
	}, mods)
}
