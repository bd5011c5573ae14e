package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelson/keelson/bench/internal/benchenv"
	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/tenancy"
)

func keelsonSetup(ctx context.Context, o options) (*database.DB, func(), error) {
	dbURL, drop, err := benchenv.Throwaway(ctx, o.adminURL, "keelson")
	if err != nil {
		return nil, nil, err
	}
	db, err := database.Open(ctx, database.Config{URL: dbURL, MaxOpenConns: 20})
	if err != nil {
		drop()
		return nil, nil, err
	}
	if err := database.Migrate(ctx, db.SQL(), []database.MigrationSet{{Owner: "platform", FS: migrations.For("platform")}}); err != nil {
		_ = db.Close()
		drop()
		return nil, nil, err
	}
	return db, func() { _ = db.Close(); drop() }, nil
}

func keelsonRunner(db *database.DB, o options, worked *atomic.Int64) (*jobs.Runner, error) {
	noop := jobs.Kind{Name: "noop", Handle: func(context.Context, jobs.Job) error { worked.Add(1); return nil }}
	return jobs.NewRunner(db, jobs.Config{
		InstanceID:    "bench",
		Workers:       o.workers,
		BatchSize:     o.batch,
		PollInterval:  o.poll,
		DepthInterval: -1,
		DurableClaims: o.durable,
	}, []jobs.Kind{noop}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
}

func keelsonInsert(ctx context.Context, c *jobs.Client, n int) error {
	reqs := make([]jobs.EnqueueRequest, n)
	for i := range reqs {
		reqs[i] = jobs.EnqueueRequest{Kind: "noop", Payload: struct{}{}}
	}
	// The benchmark's jobs belong to no tenant, like a sweep's.
	_, err := c.EnqueueMany(tenancy.System(ctx, "bench"), reqs)
	return err
}

func keelsonBurndown(ctx context.Context, o options) (result, error) {
	db, cleanup, err := keelsonSetup(ctx, o)
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	client, err := jobs.NewClient(db)
	if err != nil {
		return result{}, err
	}
	for left := o.jobs; left > 0; left -= 5000 {
		if err := keelsonInsert(ctx, client, min(left, 5000)); err != nil {
			return result{}, err
		}
	}
	if _, err := db.SQL().ExecContext(ctx, "VACUUM ANALYZE jobs"); err != nil {
		return result{}, err
	}
	var worked atomic.Int64
	r, err := keelsonRunner(db, o, &worked)
	if err != nil {
		return result{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- r.Run(runCtx) }()
	for worked.Load() < int64(o.jobs) {
		time.Sleep(time.Millisecond)
	}
	// Done when the completions are committed, not only run.
	for {
		var unfinished int
		if err := db.SQL().QueryRowContext(ctx, "SELECT count(*) FROM jobs WHERE status IN ('pending', 'processing')").Scan(&unfinished); err != nil {
			return result{}, err
		}
		if unfinished == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	stop()
	if err := <-done; err != nil {
		return result{}, err
	}
	var completed int
	if err := db.SQL().QueryRowContext(ctx, "SELECT count(*) FROM jobs WHERE status = 'completed'").Scan(&completed); err != nil {
		return result{}, err
	}
	if completed != o.jobs || worked.Load() != int64(o.jobs) {
		return result{}, fmt.Errorf("keelson burn-down: %d completed, %d runs, want %d", completed, worked.Load(), o.jobs)
	}
	return result{system: "keelson", mode: "burn-down", jobs: o.jobs, elapsed: elapsed}, nil
}

func keelsonContinuous(ctx context.Context, o options) (result, error) {
	db, cleanup, err := keelsonSetup(ctx, o)
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	client, err := jobs.NewClient(db)
	if err != nil {
		return result{}, err
	}
	var worked atomic.Int64
	r, err := keelsonRunner(db, o, &worked)
	if err != nil {
		return result{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	n, elapsed, err := continuous(runCtx, o, &worked, func(ctx context.Context, n int) error { return keelsonInsert(ctx, client, n) })
	stop()
	if rerr := <-done; err == nil {
		err = rerr
	}
	return result{system: "keelson", mode: "continuous", jobs: n, elapsed: elapsed}, err
}

// continuous inserts batches while workers drain them, keeping a bounded backlog, and counts the jobs
// worked during the measured window (after a short warm-up).
func continuous(ctx context.Context, o options, worked *atomic.Int64, insert func(context.Context, int) error) (int, time.Duration, error) {
	const batch, maxBacklog = 1000, 20_000
	var inserted atomic.Int64
	insCtx, stopIns := context.WithCancel(ctx)
	defer stopIns()
	insErr := make(chan error, 1)
	go func() {
		for insCtx.Err() == nil {
			if inserted.Load()-worked.Load() > maxBacklog {
				time.Sleep(time.Millisecond)
				continue
			}
			if err := insert(insCtx, batch); err != nil {
				if insCtx.Err() != nil {
					break
				}
				insErr <- err
				return
			}
			inserted.Add(batch)
		}
		insErr <- nil
	}()
	time.Sleep(2 * time.Second) // warm-up
	start, from := time.Now(), worked.Load()
	time.Sleep(o.duration)
	n, elapsed := worked.Load()-from, time.Since(start)
	stopIns()
	return int(n), elapsed, <-insErr
}
