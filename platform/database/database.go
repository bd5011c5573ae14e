// Package database opens the GORM connection pool and carries the unit of work in the context.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	URL             string
	MaxOpenConns    int
	MaxIdleConns    int
	ConnMaxLifetime time.Duration
	// Tracer sees every statement of every connection (tests count a path's statements with it); nil = none.
	Tracer pgx.QueryTracer
}

// DB is the pool plus the unit-of-work entry point. Repositories reach the database only through Conn(ctx).
type DB struct {
	gorm   *gorm.DB
	sql    *sql.DB
	tracer atomic.Pointer[trace.Tracer] // nil: units of work record no span
}

// Trace makes every unit of work a span of tp's ("unit_of_work"); call it before use.
func (d *DB) Trace(tp trace.TracerProvider) {
	t := tp.Tracer("github.com/keelson/keelson/platform/database")
	d.tracer.Store(&t)
}

// Now is the clock every write uses: UTC and truncated to what PostgreSQL stores,
// so an updated_at token read back from the database equals the one in memory.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Open connects through pgx and checks the connection.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.URL == "" {
		return nil, errors.New("database: empty URL")
	}
	dialector := postgres.Open(cfg.URL)
	if tracer := cfg.Tracer; tracer != nil {
		dialector = postgres.New(postgres.Config{DSN: cfg.URL, OptionOpenDB: []stdlib.OptionOpenDB{
			stdlib.OptionBeforeConnect(func(_ context.Context, c *pgx.ConnConfig) error {
				c.Tracer = tracer
				return nil
			}),
		}})
	}
	g, err := gorm.Open(dialector, &gorm.Config{
		NowFunc:        Now,
		TranslateError: true,
		Logger:         logger.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("database: open: %w", err)
	}
	if err := g.Use(concurrency.Plugin{}); err != nil {
		return nil, fmt.Errorf("database: concurrency plugin: %w", err)
	}
	if err := g.Use(tenancy.Plugin{}); err != nil {
		return nil, fmt.Errorf("database: tenancy plugin: %w", err)
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, fmt.Errorf("database: pool: %w", err)
	}
	maxOpen := cfg.MaxOpenConns
	if maxOpen <= 0 {
		maxOpen = 20
	}
	maxIdle := cfg.MaxIdleConns
	if maxIdle <= 0 || maxIdle > maxOpen {
		maxIdle = maxOpen
	}
	lifetime := cfg.ConnMaxLifetime
	if lifetime <= 0 {
		lifetime = 30 * time.Minute
	}
	sqlDB.SetMaxOpenConns(maxOpen)
	sqlDB.SetMaxIdleConns(maxIdle)
	sqlDB.SetConnMaxLifetime(lifetime)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("database: ping: %w", err)
	}
	return &DB{gorm: g, sql: sqlDB}, nil
}

// Gorm is the pool-level handle, for plugins and bulk work that must not join a caller's transaction.
func (d *DB) Gorm() *gorm.DB { return d.gorm }

// SQL is the underlying pool.
func (d *DB) SQL() *sql.DB { return d.sql }

// Close closes the pool.
func (d *DB) Close() error { return d.sql.Close() }

// Ping answers whether PostgreSQL answers.
func (d *DB) Ping(ctx context.Context) error { return d.sql.PingContext(ctx) }

type txKey struct{}

// Conn returns the transaction carried by ctx, or the pool when there is none; bound to ctx either way,
// so the tenant (or system context) of ctx applies even to a transaction opened under another.
func (d *DB) Conn(ctx context.Context) *gorm.DB {
	if tx, ok := TxFromContext(ctx); ok {
		return tx.WithContext(ctx)
	}
	return d.gorm.WithContext(ctx)
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

// WithGenericPlans is WithTx for batch statements: their text is fixed while the lengths of their array
// arguments vary, and PostgreSQL, judging each length worth a custom plan, plans most executions
// afresh, which costs more than running them. Within the unit of work, prepared statements use their
// generic plan, made once per connection. Joining a caller's unit of work, it holds for the rest of it.
func (d *DB) WithGenericPlans(ctx context.Context, fn func(ctx context.Context) error) error {
	return d.WithTx(ctx, func(ctx context.Context) error {
		if err := d.Conn(ctx).Exec("SET LOCAL plan_cache_mode = force_generic_plan").Error; err != nil {
			return fmt.Errorf("database: generic plans: %w", err)
		}
		return fn(ctx)
	})
}

func (d *DB) transaction(ctx context.Context, fn func(ctx context.Context) error) error {
	hooks := &commitHooks{}
	err := d.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
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
