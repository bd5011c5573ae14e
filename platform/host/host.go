// Package host turns a list of modules into one running replica: the HTTP API, the messaging bus
// (outbox forwarders and consumers) and the job runner, all on one database and one broker.
// app uses it with the configuration from the environment; tests use it through hosttest.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/keelson/keelson/platform/admin"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/outbox"
	"github.com/keelson/keelson/platform/secrets"
	"github.com/keelson/keelson/platform/telemetry"
)

// Options are what a replica needs besides its modules.
type Options struct {
	DB         *database.DB
	Logger     *slog.Logger
	InstanceID string
	Tokens     []string // bootstrap bearer tokens (API_TOKENS): every scope, default tenant; stored tokens work besides them
	// RateLimit and RateWindow allow each token RateLimit requests per window across every replica
	// on the database (API_RATE_LIMIT); 0 = no limit.
	RateLimit  int
	RateWindow time.Duration
	// AuthFailureLimit and AuthFailureWindow bound failed authentications per source address
	// (API_AUTH_FAILURE_LIMIT); 0 = httpapi's default, negative = no bound.
	AuthFailureLimit  int
	AuthFailureWindow time.Duration
	// MetricsListener serves /metrics apart from the API (METRICS_ADDR); nil = /metrics on the API listener.
	MetricsListener net.Listener
	// MetricsPprof also serves net/http/pprof's /debug/pprof/ on MetricsListener (METRICS_PPROF).
	MetricsPprof bool
	// AuthCacheTTL bounds how long a replica trusts a token or tenant it read (0 = auth.DefaultCacheTTL).
	AuthCacheTTL time.Duration
	// CORSAllowedOrigins are the browser origins allowed to call the API cross-origin (none by default).
	CORSAllowedOrigins []string
	// TracerProvider records spans (HTTP, units of work, outbox, consumers, jobs, modules'); nil
	// means tracing is off, and trace context is still passed on.
	TracerProvider trace.TracerProvider
	Messaging      messaging.Config // AMQPURL at least
	Jobs           jobs.Config      // InstanceID is taken from Options
	// ShutdownTimeout bounds the HTTP drain at stop; the bus and the runner have their own bounds. Default 10s.
	ShutdownTimeout time.Duration
	// Background runs the bus and the job runner beside the HTTP API. Without it a replica only
	// serves HTTP and every published event stays in the outbox.
	Background bool
	// Pages are browser pages mounted beside the API (the web console); the platform knows them only
	// through this interface, so a UI lives outside it and calls the API like any client.
	Pages []Pages
	// Secrets seals what modules store at rest (KEELSON_ENCRYPTION_KEYS); nil stores values as they are.
	Secrets *secrets.Box
}

// Pages is a set of browser pages served by the replica beside its API.
type Pages interface {
	// Schedules are the pages' periodic jobs (pruning their sessions), run like the modules'.
	Schedules(db *database.DB) []jobs.Schedule
	// Mount adds the pages' routes to env.Engine; it runs after every API route is declared.
	Mount(env PageEnv) error
}

// PageEnv is what pages get from the replica they are mounted on.
type PageEnv struct {
	Engine     *gin.Engine
	API        *httpapi.API
	Auth       *auth.Authenticator
	Tokens     *auth.Store
	DB         *database.DB
	Logger     *slog.Logger
	Registry   *module.Registry
	InstanceID string
}

// Replica is one process's worth of Keelson.
type Replica struct {
	Engine   *gin.Engine
	Registry *module.Registry
	Metrics  *prometheus.Registry
	opts     Options
	bus      *messaging.Bus
	runner   *jobs.Runner
}

// New registers every module and wires its declarations into the platform. It does not connect to the broker.
func New(opts Options, mods []module.Module) (*Replica, error) {
	if opts.DB == nil || opts.Logger == nil || opts.InstanceID == "" {
		return nil, errors.New("host: DB, Logger and InstanceID are required")
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		telemetry.BuildInfo())

	relay, err := outbox.NewRelay(opts.DB)
	if err != nil {
		return nil, err
	}
	events, err := outbox.NewPublisher(opts.DB, relay) // wakes this replica's forwarders after each commit
	if err != nil {
		return nil, err
	}
	if tp := opts.TracerProvider; tp != nil {
		opts.DB.Trace(tp)
		events.Trace(tp)
		opts.Messaging.TracerProvider = tp
	}
	jobClient, err := jobs.NewClient(opts.DB)
	if err != nil {
		return nil, err
	}
	registry := module.NewRegistry(module.Deps{
		DB: opts.DB, Events: events, Jobs: jobClient, Logger: opts.Logger, Metrics: metrics, InstanceID: opts.InstanceID,
		TracerProvider: opts.TracerProvider, Secrets: opts.Secrets,
	})
	for _, m := range mods {
		if err := m.Register(registry.For(m)); err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name(), err)
		}
	}
	if err := registry.Err(); err != nil {
		return nil, fmt.Errorf("event catalog: %w", err)
	}

	bus, err := messaging.New(opts.Messaging, relay, opts.Logger, metrics, registry.Subscriptions())
	if err != nil {
		return nil, err
	}
	jobsCfg := opts.Jobs
	jobsCfg.InstanceID = opts.InstanceID
	jobsCfg.TracerProvider = opts.TracerProvider
	schedules := append(registry.Schedules(), pruneInbox(opts.DB), pruneIdempotencyKeys(opts.DB))
	for _, p := range opts.Pages {
		schedules = append(schedules, p.Schedules(opts.DB)...)
	}
	runner, err := jobs.NewRunner(opts.DB, jobsCfg, registry.JobKinds(), schedules, opts.Logger, metrics)
	if err != nil {
		return nil, err
	}

	authn, err := auth.NewAuthenticator(auth.AuthenticatorOptions{DB: opts.DB, BootstrapTokens: opts.Tokens, CacheTTL: opts.AuthCacheTTL})
	if err != nil {
		return nil, err
	}
	var limiter httpapi.RateLimiter
	if opts.RateLimit > 0 {
		if limiter, err = auth.NewLimiter(opts.DB, opts.RateLimit, opts.RateWindow); err != nil {
			return nil, err
		}
	}
	engine, api, err := httpapi.NewEngine(httpapi.Options{
		Logger:             opts.Logger,
		Auth:               authn,
		RateLimit:          limiter,
		AuthFailureLimit:   opts.AuthFailureLimit,
		AuthFailureWindow:  opts.AuthFailureWindow,
		CORSAllowedOrigins: opts.CORSAllowedOrigins,
		TracerProvider:     opts.TracerProvider,
		Metrics:            metrics,
		MetricsElsewhere:   opts.MetricsListener != nil,
		Ready:              map[string]func(context.Context) error{"postgres": opts.DB.Ping, "rabbitmq": bus.Ping},
		ConflictCodes:      registry.ConflictCodes(),
		DB:                 opts.DB,
		Events:             registry.Catalog().Docs,
	})
	if err != nil {
		return nil, err
	}
	for _, rs := range registry.RouteSets() {
		rs.Mount(api)
	}
	store, err := auth.NewStore(opts.DB)
	if err != nil {
		return nil, err
	}
	if err := admin.Mount(api, store, authn); err != nil {
		return nil, err
	}
	for _, p := range opts.Pages {
		if err := p.Mount(PageEnv{Engine: engine, API: api, Auth: authn, Tokens: store, DB: opts.DB, Logger: opts.Logger,
			Registry: registry, InstanceID: opts.InstanceID}); err != nil {
			return nil, err
		}
	}
	return &Replica{Engine: engine, Registry: registry, Metrics: metrics, opts: opts, bus: bus, runner: runner}, nil
}

// Ready is closed once the bus has declared its topology and consumes; never closed without Background.
func (r *Replica) Ready() <-chan struct{} { return r.bus.Ready() }

// Run serves on listener until ctx ends, then stops taking work and lets in-flight work finish or be
// released within the shutdown bounds. A cancelled ctx is a clean stop (nil).
func (r *Replica) Run(ctx context.Context, listener net.Listener) error {
	srv := &http.Server{
		Handler:           r.Engine,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		r.opts.Logger.Info("serving", "addr", listener.Addr().String(), "instance_id", r.opts.InstanceID)
		if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(gctx), r.opts.ShutdownTimeout)
		defer cancel()
		// Connections accepted but still silent count as busy for up to 5 s; past the bound, close them.
		if err := srv.Shutdown(shutdownCtx); err != nil {
			r.opts.Logger.Warn("http: connections still open at the shutdown bound; closing them", "error", err)
			_ = srv.Close()
		}
		return nil
	})
	if ml := r.opts.MetricsListener; ml != nil {
		metricsSrv := &http.Server{Handler: metricsMux(r.Metrics, r.opts.MetricsPprof), ReadHeaderTimeout: 10 * time.Second}
		g.Go(func() error {
			r.opts.Logger.Info("serving metrics", "addr", ml.Addr().String())
			if err := metricsSrv.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("metrics: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			return metricsSrv.Close()
		})
	}
	if r.opts.Background {
		g.Go(func() error { return named("messaging", r.bus.Run(gctx)) })
		g.Go(func() error { return named("jobs", r.runner.Run(gctx)) })
		for _, l := range r.Registry.Loops() {
			g.Go(func() error { return named(l.Name, l.Run(gctx)) })
		}
	}
	err := g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		r.opts.Logger.Info("stopped", "instance_id", r.opts.InstanceID)
		return nil
	}
	return err
}

// metricsMux serves /metrics and, when asked, the runtime profiles: an operator's listener, never the API's.
func metricsMux(g prometheus.Gatherer, profiles bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", httpapi.MetricsHandler(g))
	if profiles {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func named(component string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", component, err)
}

// inboxRetention must exceed how long a message can be redelivered after it was first handled.
const inboxRetention = 7 * 24 * time.Hour

// pruneInbox keeps the inbox from growing without bound; it runs on one replica at a time.
func pruneInbox(db *database.DB) jobs.Schedule {
	return jobs.Schedule{Name: "messaging.prune_inbox", Interval: time.Hour, Run: func(ctx context.Context) error {
		_, err := messaging.PruneInbox(ctx, db, inboxRetention)
		return err
	}}
}

// pruneIdempotencyKeys deletes Idempotency-Key rows past their 24 h lifetime, in batches, on one replica at a time.
func pruneIdempotencyKeys(db *database.DB) jobs.Schedule {
	return jobs.Schedule{Name: "httpapi.prune_idempotency_keys", Interval: 10 * time.Minute, Run: func(ctx context.Context) error {
		_, err := httpapi.PruneIdempotencyKeys(ctx, db, 1000)
		return err
	}}
}
