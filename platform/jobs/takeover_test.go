package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/database/dbtest"
)

// A live worker whose claim was taken over (a pause longer than the lease) must stop and write nothing.
func TestRunner_a_live_worker_that_lost_its_job_lease_is_cancelled_and_records_nothing(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	res, _ := client.Enqueue(systemCtx(), "long", nil, EnqueueOptions{})
	causes := make(chan error, 1)
	// Two seconds: heartbeats every 500 ms, each with 500 ms to commit, so a loaded machine does not let the
	// lease expire by itself (errLeaseExpired) before the takeover.
	r := newTestRunner(t, db, Config{InstanceID: "slow", Lease: 2 * time.Second}, []Kind{{Name: "long",
		Handle: func(ctx context.Context, job Job) error {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil // claims success: must not be recorded
		}}}, nil)
	startRunner(t, r)
	waitFor(t, 30*time.Second, "the job claimed", func() bool { return loadJob(t, db, res.ID).Status == "processing" })
	// Another replica takes the job over, as after an expired lease.
	mustExec(t, db, `UPDATE jobs SET claimed_by = 'thief', attempt = attempt + 1, lease_expires_at = now() + interval '1 hour' WHERE id = $1`, res.ID)
	select {
	case cause := <-causes:
		if !errors.Is(cause, errLeaseLost) {
			t.Fatalf("job context ended with %v, want the lease-lost cause", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job kept running after its lease was lost")
	}
	waitFor(t, 30*time.Second, "the lost lease counted", func() bool { return counter(t, r.metrics.lostLeases) == 1 })
	if s := loadJob(t, db, res.ID); s.Status != "processing" || s.ClaimedBy != "thief" || s.Attempt != 2 {
		t.Fatalf("job = %+v, want untouched: processing by thief, attempt 2", s)
	}
}

func TestSchedule_a_run_that_lost_its_lease_is_cancelled_and_the_new_holder_keeps_the_row(t *testing.T) {
	db := dbtest.New(t)
	causes := make(chan error, 1)
	started := make(chan struct{}, 1)
	r := newTestRunner(t, db, Config{InstanceID: "slow", Lease: 2 * time.Second}, nil, []Schedule{{
		Name: "sweep", Interval: time.Hour, Run: func(ctx context.Context) error {
			started <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil
		}}})
	startRunner(t, r)
	receive(t, started, 30*time.Second, "the run started")
	mustExec(t, db, `UPDATE job_schedules SET claimed_by = 'thief', run_token = run_token + 1, lease_expires_at = now() + interval '1 hour' WHERE name = 'sweep'`)
	select {
	case cause := <-causes:
		if !errors.Is(cause, errLeaseLost) {
			t.Fatalf("run context ended with %v, want the lease-lost cause", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run kept going after its lease was lost")
	}
	waitFor(t, 30*time.Second, "the lost run counted", func() bool {
		return counter(t, r.metrics.scheduleRuns.WithLabelValues("sweep", "lost")) == 1
	})
	var claimedBy string
	var finished *time.Time
	if err := db.SQL().QueryRow(`SELECT claimed_by, last_finished_at FROM job_schedules WHERE name = 'sweep'`).Scan(&claimedBy, &finished); err != nil {
		t.Fatal(err)
	}
	if claimedBy != "thief" || finished != nil {
		t.Fatalf("schedule row claimed_by=%s finished=%v, want untouched (thief, never finished)", claimedBy, finished)
	}
}

func TestSchedule_next_run_is_planned_from_the_completion_time(t *testing.T) {
	db := dbtest.New(t)
	ran := make(chan struct{}, 10)
	r := newTestRunner(t, db, Config{InstanceID: "w"}, nil, []Schedule{{
		Name: "report", Interval: time.Hour, Run: func(ctx context.Context) error {
			// A long-overdue row must not run back to back: next_run_at moves from now, not from the old value.
			ran <- struct{}{}
			return nil
		}}})
	mustExec(t, db, `INSERT INTO job_schedules (name, interval_ms, next_run_at) VALUES ('report', 3600000, now() - interval '5 hours')`)
	startRunner(t, r)
	receive(t, ran, 30*time.Second, "the overdue schedule ran")
	waitFor(t, 30*time.Second, "the run recorded", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM job_schedules WHERE name = 'report' AND claimed_by IS NULL
			AND next_run_at BETWEEN last_finished_at + interval '59 minutes' AND last_finished_at + interval '61 minutes'`) == 1
	})
	select {
	case <-ran:
		t.Fatal("the schedule ran twice within its interval")
	default:
	}
}
