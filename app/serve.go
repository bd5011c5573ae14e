package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/outbox"
)

// application is one replica: the HTTP API, the messaging bus (outbox forwarders and consumers) and the job runner.
type application struct {
	cfg    Config
	logger *slog.Logger
	db     *database.DB
	engine *gin.Engine
	bus    *messaging.Bus
	runner *jobs.Runner
}

func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	mods, err := modules(cfg)
	if err != nil {
		return err
	}
	app, err := newApplication(ctx, cfg, logger, mods)
	if err != nil {
		return err
	}
	defer app.db.Close()
	var lc net.ListenConfig
	listener, err := lc.Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	return app.run(ctx, listener)
}

// newApplication opens the database and wires every module's declarations into the platform.
func newApplication(ctx context.Context, cfg Config, logger *slog.Logger, mods []module.Module) (*application, error) {
	logger.Info("starting", "config", cfg)
	db, err := database.Open(ctx, database.Config{URL: cfg.DatabaseURL, MaxOpenConns: cfg.DBMaxOpenConns})
	if err != nil {
		return nil, err
	}
	app, err := wire(cfg, logger, db, mods)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return app, nil
}

func wire(cfg Config, logger *slog.Logger, db *database.DB, mods []module.Module) (*application, error) {
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	events, err := outbox.NewPublisher(db)
	if err != nil {
		return nil, err
	}
	jobClient, err := jobs.NewClient(db)
	if err != nil {
		return nil, err
	}
	registry := module.NewRegistry(module.Deps{
		DB: db, Events: events, Jobs: jobClient, Logger: logger, Metrics: metrics, InstanceID: cfg.InstanceID,
	})
	for _, m := range mods {
		if err := m.Register(registry.For(m)); err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name(), err)
		}
	}

	bus, err := messaging.New(messaging.Config{
		AMQPURL:         cfg.AMQPURL,
		Exchange:        cfg.AMQPExchange,
		QueuePrefix:     cfg.AMQPQueuePrefix,
		PollInterval:    cfg.OutboxPollInterval,
		ShutdownTimeout: cfg.ShutdownTimeout - 5*time.Second,
	}, db, logger, metrics, registry.Subscriptions())
	if err != nil {
		return nil, err
	}
	runner, err := jobs.NewRunner(db, jobs.Config{
		InstanceID:      cfg.InstanceID,
		Workers:         cfg.JobWorkers,
		ShutdownTimeout: cfg.ShutdownTimeout - 5*time.Second,
	}, registry.JobKinds(), registry.Schedules(), logger, metrics)
	if err != nil {
		return nil, err
	}

	engine, api, err := httpapi.NewEngine(httpapi.Options{
		Logger:        logger,
		Tokens:        cfg.APITokens,
		Metrics:       metrics,
		Ready:         map[string]func(context.Context) error{"postgres": db.Ping, "rabbitmq": bus.Ping},
		ConflictCodes: registry.ConflictCodes(),
		OpenAPI:       registry.OpenAPIFragments(),
	})
	if err != nil {
		return nil, err
	}
	for _, rs := range registry.RouteSets() {
		rs.Mount(api)
	}
	return &application{cfg: cfg, logger: logger, db: db, engine: engine, bus: bus, runner: runner}, nil
}

// run serves until ctx ends, then stops taking work and lets in-flight work finish or be released,
// all within the shutdown timeout.
func (a *application) run(ctx context.Context, listener net.Listener) error {
	srv := &http.Server{
		Handler:           a.engine,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		a.logger.Info("serving", "addr", listener.Addr().String(), "instance_id", a.cfg.InstanceID)
		if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout/2)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	})
	g.Go(func() error { return a.bus.Run(gctx) })
	g.Go(func() error { return a.runner.Run(gctx) })
	err := g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		a.logger.Info("stopped")
		return nil
	}
	return err
}
