// Package database opens the GORM connection pool and carries the unit of work in the context.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/tenancy"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Config sizes the pool. Zero values take the defaults of Open.
type Config struct {
	URL string
	// MaxOpenConns is every connection the DB may open, its WithGenericPlans pool's included.
	MaxOpenConns    int
	MaxIdleConns    int
	ConnMaxLifetime time.Duration
	// Tracer sees every statement of every connection (tests count a path's statements with it); nil = none.
	Tracer pgx.QueryTracer
	// TransactionPooling is for a URL that reaches PostgreSQL through a pooler in transaction mode
	// (PgBouncer pool_mode=transaction), where consecutive transactions of one connection may run on
	// different server sessions: statements are not prepared by name (pgx describes them once and sends
	// them unnamed), no session starts with settings (WithGenericPlans sets them per unit of work), and
	// migrations lock a table instead of holding a session lock (MigrateOptions.TableLock).
	TransactionPooling bool
}

// DB is the pool plus the unit-of-work entry point. Repositories reach the database only through Conn(ctx).
type DB struct {
	gorm       *gorm.DB
	sql        *sql.DB
	generic    *gorm.DB // sessions started with genericPlansSettings, for WithGenericPlans; nil when the budget is small
	genericSQL *sql.DB
	tracer     atomic.Pointer[trace.Tracer] // nil: units of work record no span
	pooled     bool                         // Config.TransactionPooling
}

// TransactionPooling reports whether the DB was opened for a pooler in transaction mode.
func (d *DB) TransactionPooling() bool { return d.pooled }

// Trace makes every unit of work a span of tp's ("unit_of_work"); call it before use.
func (d *DB) Trace(tp trace.TracerProvider) {
	t := tp.Tracer("github.com/keelson/keelson/platform/database")
	d.tracer.Store(&t)
}

// Now is the clock every write uses: UTC and truncated to what PostgreSQL stores,
// so an updated_at token read back from the database equals the one in memory.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// genericPlansSettings are the settings of WithGenericPlans. A generic plan is made once per session and
// kept until the tables' statistics change: made while a table is young (a few rows, no statistics
// yet) it would scan the table whole, and keep doing so as the table grows until the next ANALYZE.
// Batch statements reach every row by key, so sequential scans are off.
var genericPlansSettings = map[string]string{"plan_cache_mode": "force_generic_plan", "enable_seqscan": "off"}

// genericPlansConns is the most connections of the budget that the pool of WithGenericPlans takes:
// a webhooks replica writes one batch of takes and one of outcomes at a time.
const genericPlansConns = 2

// Open connects through pgx and checks the connection. MaxOpenConns is the whole budget: from 4
// connections on, a quarter of it, at most genericPlansConns, is a pool of its own for WithGenericPlans
// (opened on first use); below, there is one pool.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.URL == "" {
		return nil, errors.New("database: empty URL")
	}
	maxOpen := cfg.MaxOpenConns
	if maxOpen <= 0 {
		maxOpen = 20
	}
	genericConns := min(genericPlansConns, maxOpen/4)
	if cfg.TransactionPooling {
		genericConns = 0 // a session's settings would stay on whichever server session the pooler gave it
	}
	maxOpen -= genericConns
	maxIdle := cfg.MaxIdleConns
	if maxIdle <= 0 || maxIdle > maxOpen {
		maxIdle = maxOpen
	}
	lifetime := cfg.ConnMaxLifetime
	if lifetime <= 0 {
		lifetime = 30 * time.Minute
	}
	g, sqlDB, err := openPool(cfg, nil, maxOpen, maxIdle, lifetime)
	if err != nil {
		return nil, err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("database: ping: %w", err)
	}
	d := &DB{gorm: g, sql: sqlDB, pooled: cfg.TransactionPooling}
	if genericConns > 0 {
		d.generic, d.genericSQL, err = openPool(cfg, genericPlansSettings, genericConns, genericConns, lifetime)
		if err != nil {
			_ = sqlDB.Close()
			return nil, err
		}
	}
	return d, nil
}

// openPool opens a GORM pool with Keelson's plugins whose sessions start with the settings params.
func openPool(cfg Config, params map[string]string, maxOpen, maxIdle int, lifetime time.Duration) (*gorm.DB, *sql.DB, error) {
	dialector := postgres.New(postgres.Config{DSN: cfg.URL, OptionOpenDB: []stdlib.OptionOpenDB{
		stdlib.OptionBeforeConnect(func(_ context.Context, c *pgx.ConnConfig) error {
			if cfg.Tracer != nil {
				c.Tracer = cfg.Tracer
			}
			if cfg.TransactionPooling && c.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
				// A statement prepared by name lives in one server session, which the next transaction may not get.
				c.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
			}
			if len(params) > 0 {
				// c is a shallow copy: its map is shared by every connect of the pool, which run concurrently.
				runtime := maps.Clone(c.RuntimeParams)
				if runtime == nil {
					runtime = map[string]string{}
				}
				maps.Copy(runtime, params)
				c.RuntimeParams = runtime
			}
			return nil
		}),
	}})
	g, err := gorm.Open(dialector, &gorm.Config{
		NowFunc:        Now,
		TranslateError: true,
		Logger:         logger.Discard,
		// Open pings the main pool itself, with its context; the generic-plans pool connects on first use.
		DisableAutomaticPing: true,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("database: open: %w", err)
	}
	if err := g.Use(concurrency.Plugin{}); err != nil {
		return nil, nil, fmt.Errorf("database: concurrency plugin: %w", err)
	}
	if err := g.Use(tenancy.Plugin{}); err != nil {
		return nil, nil, fmt.Errorf("database: tenancy plugin: %w", err)
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, nil, fmt.Errorf("database: pool: %w", err)
	}
	sqlDB.SetMaxOpenConns(maxOpen)
	sqlDB.SetMaxIdleConns(maxIdle)
	sqlDB.SetConnMaxLifetime(lifetime)
	return g, sqlDB, nil
}

// Gorm is the pool-level handle, for plugins and bulk work that must not join a caller's transaction.
func (d *DB) Gorm() *gorm.DB { return d.gorm }

// SQL is the underlying pool.
func (d *DB) SQL() *sql.DB { return d.sql }

// Close closes the pools.
func (d *DB) Close() error {
	if d.genericSQL == nil {
		return d.sql.Close()
	}
	return errors.Join(d.sql.Close(), d.genericSQL.Close())
}

// Ping answers whether PostgreSQL answers.
func (d *DB) Ping(ctx context.Context) error { return d.sql.PingContext(ctx) }

type txKey struct{}

// genericPlansKey marks a context whose statements outside a unit of work, and whose units of work,
// run on the generic-plans pool.
type genericPlansKey struct{}

// pool is the pool that ctx's statements and units of work run on.
func (d *DB) pool(ctx context.Context) *gorm.DB {
	if d.generic != nil && ctx.Value(genericPlansKey{}) != nil {
		return d.generic
	}
	return d.gorm
}

// Conn returns the transaction carried by ctx, or the pool when there is none; bound to ctx either way,
// so the tenant (or system context) of ctx applies even to a transaction opened under another.
func (d *DB) Conn(ctx context.Context) *gorm.DB {
	if tx, ok := TxFromContext(ctx); ok {
		return tx.WithContext(ctx)
	}
	return d.pool(ctx).WithContext(ctx)
}

// TxFromContext returns the transaction of the unit of work running in ctx.
func TxFromContext(ctx context.Context) (*gorm.DB, bool) {
	tx, ok := ctx.Value(txKey{}).(*gorm.DB)
	return tx, ok
}

// WithTx runs fn in one transaction carried by the context it receives. A nested call joins the
// outer transaction instead of opening a savepoint: the xmin of rows written under a savepoint is
// the subtransaction's id, which would break row versions read later in the same unit of work.
func (d *DB) WithTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if _, ok := TxFromContext(ctx); ok {
		return fn(ctx)
	}
	if t := d.tracer.Load(); t != nil {
		var span trace.Span
		ctx, span = (*t).Start(ctx, "unit_of_work")
		defer span.End()
		err := d.transaction(ctx, fn)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "rolled back")
		}
		return err
	}
	return d.transaction(ctx, fn)
}

// WithGenericPlans runs fn's batch statements on their generic plans: their text is fixed while the
// lengths of their array arguments vary, and PostgreSQL, judging each length worth a custom plan,
// plans most executions afresh, which costs more than running them (a lone webhook take is planned
// in about a millisecond and run in a fifth of that). Outside a unit of work, fn's statements, and the
// units of work it opens, run on a pool whose sessions plan every prepared statement once
// (genericPlansSettings), at no extra round trip; fn must not hold one of its connections while it
// asks for another. Within a caller's unit of work, or when the budget left no room for that pool, the
// settings hold for the rest of the unit of work.
func (d *DB) WithGenericPlans(ctx context.Context, fn func(ctx context.Context) error) error {
	if _, inTx := TxFromContext(ctx); !inTx && d.generic != nil {
		return fn(context.WithValue(ctx, genericPlansKey{}, true))
	}
	return d.WithTx(ctx, func(ctx context.Context) error {
		err := d.Conn(ctx).Exec(`SELECT set_config('plan_cache_mode', ?, true), set_config('enable_seqscan', ?, true)`,
			genericPlansSettings["plan_cache_mode"], genericPlansSettings["enable_seqscan"]).Error
		if err != nil {
			return fmt.Errorf("database: generic plans: %w", err)
		}
		return fn(ctx)
	})
}

func (d *DB) transaction(ctx context.Context, fn func(ctx context.Context) error) error {
	hooks := &commitHooks{}
	err := d.pool(ctx).WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return fn(context.WithValue(context.WithValue(ctx, txKey{}, tx), hooksKey{}, hooks))
	})
	if err == nil {
		hooks.run()
	}
	return err
}

type hooksKey struct{}

// commitHooks are what a unit of work runs once it committed.
type commitHooks struct {
	mu  sync.Mutex
	fns []func()
}

func (h *commitHooks) run() {
	h.mu.Lock()
	fns := h.fns
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// AfterCommit runs fn once the unit of work of ctx has committed, and never if it rolls back; outside
// a unit of work, at once. fn runs on the committing goroutine: it must not block.
func AfterCommit(ctx context.Context, fn func()) {
	h, ok := ctx.Value(hooksKey{}).(*commitHooks)
	if !ok {
		fn()
		return
	}
	h.mu.Lock()
	h.fns = append(h.fns, fn)
	h.mu.Unlock()
}

// InTx reports whether ctx carries a unit of work.
func InTx(ctx context.Context) bool {
	_, ok := TxFromContext(ctx)
	return ok
}
