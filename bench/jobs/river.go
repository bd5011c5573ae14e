package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	worked *atomic.Int64
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.worked.Add(1)
	return nil
}

func riverSetup(ctx context.Context, o options, worked *atomic.Int64) (*pgxpool.Pool, *river.Client[pgx.Tx], func(), error) {
	dbURL, drop, err := benchenv.Throwaway(ctx, o.adminURL, "river")
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		drop()
		return nil, nil, nil, err
	}
	cfg.MaxConns = 20 // the same pool size as Keelson's
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, nil, nil, err
	}
	cleanup := func() { pool.Close(); drop() }
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		cleanup()
		return nil, nil, nil, fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{worked: worked})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.workers}},
		Workers:           workers,
		FetchCooldown:     2 * time.Millisecond, // riverbench's settings
		FetchPollInterval: o.poll,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return pool, client, cleanup, nil
}

func riverInsert(ctx context.Context, c *river.Client[pgx.Tx], n int) error {
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	_, err := c.InsertManyFast(ctx, params)
	return err
}

func riverBurndown(ctx context.Context, o options) (result, error) {
	var worked atomic.Int64
	pool, client, cleanup, err := riverSetup(ctx, o, &worked)
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	for left := o.jobs; left > 0; left -= 5000 {
		if err := riverInsert(ctx, client, min(left, 5000)); err != nil {
			return result{}, err
		}
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE river_job"); err != nil {
		return result{}, err
	}
	completed, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: o.jobs + 1000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer unsubscribe()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return result{}, err
	}
	// Completed events fire once the batch completer has committed.
	for range o.jobs {
		<-completed
	}
	elapsed := time.Since(start)
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return result{}, err
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n); err != nil {
		return result{}, err
	}
	if n != o.jobs {
		return result{}, fmt.Errorf("river burn-down: %d completed, want %d", n, o.jobs)
	}
	return result{system: "river", mode: "burn-down", jobs: o.jobs, elapsed: elapsed}, nil
}

func riverContinuous(ctx context.Context, o options) (result, error) {
	var worked atomic.Int64
	_, client, cleanup, err := riverSetup(ctx, o, &worked)
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	if err := client.Start(ctx); err != nil {
		return result{}, err
	}
	n, elapsed, err := continuous(ctx, o, &worked, func(ctx context.Context, n int) error { return riverInsert(ctx, client, n) })
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if serr := client.Stop(stopCtx); err == nil {
		err = serr
	}
	return result{system: "river", mode: "continuous", jobs: n, elapsed: elapsed}, err
}
