package jobs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/telemetry"
	"github.com/keelson/keelson/platform/tenancy"
)

// execute runs one claimed job and records its outcome, only while the claim is still ours.
func (r *Runner) execute(ctx context.Context, d dispatched, completions chan<- fence, completerStopped <-chan struct{}) {
	defer r.slotFreed()
	c := d.job
	f := fence{c.ID, c.Attempt}
	kind := r.kinds[c.Kind]
	c.MaxAttempts = c.storedMaxAttempts
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = kind.Options.MaxAttempts
	}
	if ctx.Err() != nil {
		r.releaseOne(f) // shutting down: claimed but never started
		return
	}
	if c.Attempt > c.MaxAttempts {
		// Reclaimed after its last attempt's worker died: no attempts left.
		if r.untrack(f) {
			r.recordFailure(f, kind, c.Job, errors.New("lease expired during the last attempt"), true)
		}
		return
	}

	runCtx, cancel := context.WithTimeout(d.ctx, kind.Options.Timeout)
	start := time.Now()
	var err error
	if r.tracer == nil {
		err = call(jobContext(runCtx, c.Job), kind.Handle, c.Job)
	} else {
		err = r.callTraced(jobContext(runCtx, c.Job), kind.Handle, c)
	}
	cancel()
	r.metrics.duration.WithLabelValues(c.Kind).Observe(time.Since(start).Seconds())

	if !r.untrack(f) {
		r.log.Warn("jobs: job finished after its claim ended; nothing recorded", "job", c.ID, "kind", c.Kind,
			"cause", context.Cause(d.ctx), "err", err)
		return
	}
	if err == nil {
		select {
		case completions <- f:
		case <-completerStopped:
			r.log.Warn("jobs: completion dropped at shutdown; the job will run again after its lease", "job", c.ID)
		}
		return
	}
	r.metrics.failures.WithLabelValues(c.Kind).Inc()
	r.recordFailure(f, kind, c.Job, err, c.Attempt >= c.MaxAttempts)
}

// jobContext acts for the job's tenant, or names the system context of a job enqueued from one.
func jobContext(ctx context.Context, job Job) context.Context {
	if job.TenantID != uuid.Nil {
		return tenancy.With(ctx, job.TenantID)
	}
	return tenancy.System(ctx, "job "+job.Kind)
}

// callTraced runs the handler inside a span that is a child (not a link) of the span that enqueued
// the job: the job is deferred work of that request, like a consumer of its event, so it belongs in
// the request's one trace; each attempt is a sibling span under that parent.
func (r *Runner) callTraced(ctx context.Context, h Handler, c claimed) error {
	if c.traceparent.Valid {
		ctx = telemetry.WithTraceparent(ctx, c.traceparent.String)
	}
	ctx, span := r.tracer.Start(ctx, c.Kind+" run", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("keelson.job.id", c.ID.String()),
			attribute.String("keelson.job.kind", c.Kind),
			attribute.Int("keelson.job.attempt", c.Attempt),
		))
	defer span.End()
	err := call(ctx, h, c.Job)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "job attempt failed")
	}
	return err
}

// call runs the handler; a panic is a failed attempt.
func call(ctx context.Context, h Handler, job Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, job)
}

// recordFailure schedules a retry with backoff, or fails the job when attempts are exhausted.
func (r *Runner) recordFailure(f fence, kind Kind, job Job, cause error, final bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reason := truncate(cause.Error(), 4000)
	var ours bool
	var err error
	if final {
		ours, err = r.store.fail(ctx, f, reason)
	} else {
		ours, err = r.store.retry(ctx, f, r.backoff(f.attempt), reason)
	}
	switch {
	case err != nil:
		r.log.Error("jobs: recording a failure failed; the lease will expire and the job run again", "job", f.id, "err", err)
	case !ours:
		r.metrics.lostLeases.Inc()
		r.log.Warn("jobs: failure not recorded: the job is no longer ours", "job", f.id, "attempt", f.attempt)
	case final:
		r.log.Error("jobs: job failed for good", "job", f.id, "kind", kind.Name, "attempt", f.attempt, "err", cause)
	default:
		r.log.Warn("jobs: attempt failed; will retry", "job", f.id, "kind", kind.Name, "attempt", f.attempt, "max_attempts", job.MaxAttempts, "err", cause)
	}
}

// backoff is RetryBase·2^(attempt-1) capped at RetryMax, jittered to [½, 1] of that so retries spread.
func (r *Runner) backoff(attempt int) time.Duration {
	d := r.cfg.RetryBase
	for i := 1; i < attempt && d < r.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, r.cfg.RetryMax)
	return d/2 + rand.N(d/2+1)
}

// releaseOne gives back a claim that was never started.
func (r *Runner) releaseOne(f fence) {
	if !r.untrack(f) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.store.release(ctx, []fence{f}); err != nil {
		r.log.Error("jobs: release failed; the lease will expire instead", "job", f.id, "err", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
