package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/database"
)

// Causes of a job's context ending early.
var (
	errLeaseLost    = errors.New("jobs: lease lost to another worker")
	errLeaseExpired = errors.New("jobs: lease expired before it could be extended")
	errShutdown     = errors.New("jobs: shutdown timeout reached")
)

// Runner claims and runs jobs of its kinds and runs its schedules. Every replica runs one;
// PostgreSQL decides who owns what.
type Runner struct {
	cfg       Config
	store     *store
	kinds     map[string]Kind
	kindNames []string
	schedules []Schedule
	log       *slog.Logger
	metrics   *metrics
	tracer    trace.Tracer // nil: no spans
	started   atomic.Bool

	busy  atomic.Int64  // slots taken: claimed jobs not yet finished
	freed chan struct{} // a slot was freed (capacity 1, never blocks)

	mu       sync.Mutex
	inflight map[uuid.UUID]*running
}

// running is a claim this worker holds; an entry missing from inflight means the claim was lost or released.
type running struct {
	fence
	leaseUntil time.Time // local, conservative: measured from before the claim was sent
	watchdog   *time.Timer
	cancel     context.CancelCauseFunc
}

// NewRunner validates the kinds and schedules (app passes module.Registry's JobKinds() and Schedules())
// and adds the built-in prune schedule "jobs.prune".
func NewRunner(db *database.DB, cfg Config, kinds []Kind, schedules []Schedule, logger *slog.Logger, reg prometheus.Registerer) (*Runner, error) {
	if db == nil || logger == nil || reg == nil {
		return nil, errors.New("jobs: NewRunner: nil db, logger or registerer")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	r := &Runner{
		cfg:      cfg,
		store:    newStore(db.SQL(), cfg),
		kinds:    map[string]Kind{},
		log:      logger.With("component", "jobs", "instance", cfg.InstanceID),
		metrics:  m,
		freed:    make(chan struct{}, 1),
		inflight: map[uuid.UUID]*running{},
	}
	for _, k := range kinds {
		if k.Name == "" || k.Handle == nil {
			return nil, fmt.Errorf("jobs: kind %q: name and handler are required", k.Name)
		}
		if _, dup := r.kinds[k.Name]; dup {
			return nil, fmt.Errorf("jobs: kind %q registered twice", k.Name)
		}
		k.Options = k.Options.withDefaults()
		r.kinds[k.Name] = k
		r.kindNames = append(r.kindNames, k.Name)
	}
	names := map[string]bool{}
	for _, s := range append(schedules, r.pruneSchedule()) {
		if s.Name == "" || s.Run == nil || s.Interval <= 0 {
			return nil, fmt.Errorf("jobs: schedule %q: name, positive interval and Run are required", s.Name)
		}
		if names[s.Name] {
			return nil, fmt.Errorf("jobs: schedule %q registered twice", s.Name)
		}
		names[s.Name] = true
		r.schedules = append(r.schedules, s)
	}
	if cfg.TracerProvider != nil {
		r.tracer = cfg.TracerProvider.Tracer("github.com/keelson/keelson/platform/jobs")
	}
	m.exportFromStart(r.kindNames, r.schedules)
	return r, nil
}

// Run works until ctx ends, then shuts down: it stops claiming, lets in-flight jobs and schedule
// runs finish within ShutdownTimeout, releases what is left (owner-checked) and flushes completions.
func (r *Runner) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("jobs: Runner.Run called twice")
	}
	if err := r.upsertSchedules(ctx); err != nil {
		return err
	}
	// Work outlives ctx by up to ShutdownTimeout; workCtx ends when that bound is reached.
	workCtx, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)

	completions := make(chan fence, r.cfg.CompleteBatch)
	stopCompleter, completerDone := make(chan struct{}), make(chan struct{})
	go r.completeLoop(completions, stopCompleter, completerDone)

	keeperCtx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	keeperDone := make(chan struct{})
	go func() { defer close(keeperDone); r.keepLeases(keeperCtx) }()

	dispatch := make(chan dispatched, r.cfg.Workers)
	var workers, others sync.WaitGroup
	for range r.cfg.Workers {
		workers.Go(func() {
			for d := range dispatch {
				r.execute(ctx, d, completions, stopCompleter)
			}
		})
	}
	for _, s := range r.schedules {
		others.Go(func() { r.runSchedule(ctx, workCtx, s) })
	}
	if r.cfg.DepthInterval > 0 {
		others.Go(func() { r.sampleDepth(ctx) })
	}
	r.log.Info("jobs runner started", "kinds", r.kindNames, "schedules", len(r.schedules), "workers", r.cfg.Workers)

	r.fetch(ctx, workCtx, dispatch)
	close(dispatch)

	allDone := make(chan struct{})
	go func() { workers.Wait(); others.Wait(); close(allDone) }()
	bound := time.NewTimer(r.cfg.ShutdownTimeout)
	defer bound.Stop()
	select {
	case <-allDone:
	case <-bound.C:
		r.releaseAll()
		stopWork(errShutdown)
		grace := time.NewTimer(min(r.cfg.ShutdownTimeout, 2*time.Second))
		defer grace.Stop()
		select {
		case <-allDone:
		case <-grace.C:
			r.log.Warn("jobs: handlers still running after shutdown; their claims were released")
		}
	}
	stopKeeper()
	<-keeperDone
	close(stopCompleter)
	<-completerDone
	r.log.Info("jobs runner stopped")
	return nil
}

// dispatched is a claimed job on its way to a worker, with the context its run lives in.
type dispatched struct {
	job claimed
	ctx context.Context
}

// fetch claims batches while there are free slots, until ctx ends.
func (r *Runner) fetch(ctx, workCtx context.Context, out chan<- dispatched) {
	if len(r.kindNames) == 0 {
		<-ctx.Done() // schedules only
		return
	}
	minClaim := max(1, r.cfg.BatchSize/4)
	cooldown := max(time.Millisecond, r.cfg.PollInterval/4)
	last := time.Time{}
	for ctx.Err() == nil {
		free := r.cfg.Workers - int(r.busy.Load())
		if free <= 0 || (free < minClaim && time.Since(last) < cooldown) {
			r.waitSlot(ctx, cooldown)
			continue
		}
		n := min(free, r.cfg.BatchSize)
		sent := time.Now()
		// A claim is never cancelled halfway: rows it committed but we never read would wait out their lease.
		claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Lease/2)
		got, lost, err := r.store.claim(claimCtx, r.kindNames, n)
		cancel()
		last = time.Now()
		if err != nil {
			r.log.Error("jobs: claim failed", "err", err)
			sleep(ctx, r.cfg.PollInterval)
			continue
		}
		r.metrics.claimsWon.Add(float64(len(got)))
		r.metrics.claimsLost.Add(float64(lost))
		r.busy.Add(int64(len(got)))
		for _, c := range got {
			if c.reclaimed {
				r.metrics.leaseExpiries.Inc()
			}
			out <- dispatched{job: c, ctx: r.track(workCtx, c, sent)}
		}
		if len(got) < n {
			sleep(ctx, r.cfg.PollInterval)
		}
	}
}

func (r *Runner) waitSlot(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.freed:
	case <-t.C:
	case <-ctx.Done():
	}
}

// track records a claim as in flight; its context ends if the lease is lost or runs out.
func (r *Runner) track(workCtx context.Context, c claimed, sent time.Time) context.Context {
	ctx, cancel := context.WithCancelCause(workCtx)
	ent := &running{fence: fence{c.ID, c.Attempt}, leaseUntil: sent.Add(r.cfg.Lease), cancel: cancel}
	r.mu.Lock()
	r.inflight[c.ID] = ent
	ent.watchdog = time.AfterFunc(r.cfg.Lease, func() { r.expire(ent) })
	r.mu.Unlock()
	return ctx
}

// expire ends a job whose local lease ran out without a successful heartbeat.
func (r *Runner) expire(ent *running) {
	r.mu.Lock()
	cur := r.inflight[ent.id]
	if cur != ent || time.Now().Before(ent.leaseUntil) {
		r.mu.Unlock()
		return
	}
	delete(r.inflight, ent.id)
	r.mu.Unlock()
	ent.cancel(errLeaseExpired)
	r.metrics.lostLeases.Inc()
	r.log.Warn("jobs: lease ran out before a heartbeat renewed it; the job is cancelled and left to its next claimer", "job", ent.id, "attempt", ent.attempt)
}

// untrack removes a claim and reports whether it was still ours.
func (r *Runner) untrack(f fence) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ent, ok := r.inflight[f.id]
	if !ok || ent.attempt != f.attempt {
		return false
	}
	delete(r.inflight, f.id)
	ent.watchdog.Stop()
	ent.cancel(nil)
	return true
}

// slotFreed returns a worker slot and wakes the fetcher.
func (r *Runner) slotFreed() {
	r.busy.Add(-1)
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// releaseAll hands every claim still held back to pending (owner-checked), at shutdown.
func (r *Runner) releaseAll() {
	r.mu.Lock()
	var fences []fence
	for id, ent := range r.inflight {
		delete(r.inflight, id)
		ent.watchdog.Stop()
		fences = append(fences, ent.fence)
	}
	r.mu.Unlock()
	if len(fences) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ours, err := r.store.release(ctx, fences)
	if err != nil {
		r.log.Error("jobs: release at shutdown failed; the leases will expire instead", "jobs", len(fences), "err", err)
		return
	}
	r.log.Info("jobs: released unfinished claims", "released", len(ours), "no_longer_ours", len(fences)-len(ours))
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
