package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/tenancy"
)

// Schedules are rows of job_schedules. A replica runs one only after a conditional UPDATE gave it
// the row's lease (due, and free or expired); the run token bumped by that claim fences every later write.

const upsertScheduleSQL = `INSERT INTO job_schedules (name, interval_ms) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET interval_ms = EXCLUDED.interval_ms, updated_at = now()
WHERE job_schedules.interval_ms <> EXCLUDED.interval_ms`

const claimScheduleSQL = `UPDATE job_schedules
SET claimed_by = $2, lease_expires_at = now() + $3 * interval '1 millisecond', run_token = run_token + 1,
    last_started_at = now(), updated_at = now()
WHERE name = $1 AND next_run_at <= now() AND (claimed_by IS NULL OR lease_expires_at < now())`

// scheduleWaitSQL says how long until the row may be claimable: its next run; while another replica
// runs it, one interval, or its holder's lease end if sooner. A run usually ends within an interval,
// so a holder that stops between runs is replaced within one, not after its whole lease.
const scheduleWaitSQL = `SELECT (EXTRACT(EPOCH FROM GREATEST(next_run_at,
    CASE WHEN claimed_by IS NULL THEN next_run_at
         ELSE LEAST(lease_expires_at, now() + interval_ms * interval '1 millisecond') END) - now()) * 1000)::bigint
FROM job_schedules WHERE name = $1`

const extendScheduleSQL = `UPDATE job_schedules SET lease_expires_at = now() + $4 * interval '1 millisecond'
WHERE name = $1 AND claimed_by = $2 AND run_token = $3`

// completeScheduleSQL advances next_run_at from the completion time, not from the stale planned time.
const completeScheduleSQL = `UPDATE job_schedules
SET claimed_by = NULL, lease_expires_at = NULL, last_finished_at = now(), last_error = $4,
    next_run_at = now() + interval_ms * interval '1 millisecond', updated_at = now()
WHERE name = $1 AND claimed_by = $2 AND run_token = $3`

const releaseScheduleSQL = `UPDATE job_schedules SET claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
WHERE name = $1 AND claimed_by = $2 AND run_token = $3`

func (r *Runner) upsertSchedules(ctx context.Context) error {
	for _, s := range r.schedules {
		if _, err := r.store.db.ExecContext(ctx, upsertScheduleSQL, s.Name, s.Interval.Milliseconds()); err != nil {
			return fmt.Errorf("jobs: schedule %s: upsert: %w", s.Name, err)
		}
	}
	return nil
}

// runSchedule claims and runs s whenever it is due, until ctx ends.
func (r *Runner) runSchedule(ctx, workCtx context.Context, s Schedule) {
	for ctx.Err() == nil {
		token, won, err := r.claimSchedule(s)
		if err != nil {
			r.log.Error("jobs: schedule claim failed", "schedule", s.Name, "err", err)
			sleep(ctx, r.cfg.PollInterval)
			continue
		}
		if won {
			r.runScheduleOnce(workCtx, s, token)
			continue
		}
		sleep(ctx, r.scheduleWait(ctx, s))
	}
}

func (r *Runner) claimSchedule(s Schedule) (token int64, won bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Lease/2)
	defer cancel()
	err = r.store.db.QueryRowContext(ctx, claimScheduleSQL+r.store.asyncSQL+" RETURNING run_token",
		s.Name, r.cfg.InstanceID, r.store.leaseMS).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// scheduleWait is the time until the schedule may be claimable, within [5ms, 1m], jittered by up to 10%.
func (r *Runner) scheduleWait(ctx context.Context, s Schedule) time.Duration {
	var ms int64
	if err := r.store.db.QueryRowContext(ctx, scheduleWaitSQL, s.Name).Scan(&ms); err != nil {
		return r.cfg.PollInterval
	}
	d := min(max(time.Duration(ms)*time.Millisecond, 5*time.Millisecond), time.Minute)
	return d + rand.N(d/10+1)
}

// runScheduleOnce runs one claimed tick with its lease renewed, then records it (owner-checked).
func (r *Runner) runScheduleOnce(workCtx context.Context, s Schedule, token int64) {
	runCtx, cancel := context.WithCancelCause(workCtx)
	defer cancel(nil)
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); r.keepScheduleLease(runCtx, cancel, s, token) }()

	// A schedule is the deployment's work, not a customer's: it spans tenants (the sweep, pruning).
	runErr := r.traceSchedule(tenancy.System(runCtx, "schedule "+s.Name), s)
	cause := context.Cause(runCtx)
	cancel(nil)
	<-hbDone

	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	switch {
	case errors.Is(cause, errLeaseLost) || errors.Is(cause, errLeaseExpired):
		r.metrics.scheduleRuns.WithLabelValues(s.Name, "lost").Inc()
		r.log.Warn("jobs: schedule run lost its lease; nothing recorded", "schedule", s.Name, "cause", cause)
		return
	case errors.Is(cause, errShutdown):
		r.fencedSchedule(ctx, s, "release", releaseScheduleSQL, token)
		return
	}
	var lastErr *string
	outcome := "ok"
	if runErr != nil {
		msg := truncate(runErr.Error(), 4000)
		lastErr, outcome = &msg, "error"
		r.log.Error("jobs: schedule run failed", "schedule", s.Name, "err", runErr)
	}
	r.metrics.scheduleRuns.WithLabelValues(s.Name, outcome).Inc()
	r.fencedSchedule(ctx, s, "complete", completeScheduleSQL, token, lastErr)
}

func (r *Runner) fencedSchedule(ctx context.Context, s Schedule, op, query string, token int64, extra ...any) {
	ok, err := r.store.fencedOne(ctx, "schedule "+op, query, append([]any{s.Name, r.cfg.InstanceID, token}, extra...)...)
	switch {
	case err != nil:
		r.log.Error("jobs: schedule write failed; its lease will expire", "schedule", s.Name, "op", op, "err", err)
	case !ok:
		r.log.Warn("jobs: schedule no longer ours; nothing recorded", "schedule", s.Name, "op", op)
	}
}

// keepScheduleLease renews the schedule's lease every Lease/4 and cancels the run when it is lost,
// or when no renewal succeeded within the lease.
func (r *Runner) keepScheduleLease(ctx context.Context, cancel context.CancelCauseFunc, s Schedule, token int64) {
	leaseUntil := time.Now().Add(r.cfg.Lease)
	tick := time.NewTicker(r.cfg.Lease / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sent := time.Now()
		if sent.After(leaseUntil) {
			cancel(errLeaseExpired)
			return
		}
		extendCtx, stop := context.WithTimeout(ctx, r.cfg.Lease/4)
		ok, err := r.store.fencedOne(extendCtx, "extend schedule lease", extendScheduleSQL+r.store.asyncSQL,
			s.Name, r.cfg.InstanceID, token, r.store.leaseMS)
		stop()
		switch {
		case err != nil:
			r.log.Warn("jobs: schedule lease renewal failed; will retry", "schedule", s.Name, "err", err)
		case !ok:
			cancel(errLeaseLost)
			return
		default:
			leaseUntil = sent.Add(r.cfg.Lease)
		}
	}
}

// traceSchedule runs one tick inside its own root span (no request caused it), so the events and
// jobs the run writes (a sweep's redeliveries) join that trace.
func (r *Runner) traceSchedule(ctx context.Context, s Schedule) error {
	if r.tracer == nil {
		return callSchedule(ctx, s.Run)
	}
	ctx, span := r.tracer.Start(ctx, s.Name+" run", trace.WithNewRoot(),
		trace.WithAttributes(attribute.String("keelson.schedule.name", s.Name)))
	defer span.End()
	err := callSchedule(ctx, s.Run)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "schedule run failed")
	}
	return err
}

func callSchedule(ctx context.Context, run func(context.Context) error) (err error) {
	return call(ctx, func(ctx context.Context, _ Job) error { return run(ctx) }, Job{})
}
