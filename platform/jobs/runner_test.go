package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

// effectHandler writes the job's side effect, a row keyed by job id. A unique violation is "already
// done" (a re-run after a lost lease), anything else fails the attempt. runs counts executions per job.
func effectHandler(db *database.DB, runs *sync.Map) Handler {
	return func(ctx context.Context, job Job) error {
		n, _ := runs.LoadOrStore(job.ID, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		err := db.Conn(ctx).Exec(`INSERT INTO effects (job_id) VALUES (?)`, job.ID).Error
		if database.IsUniqueViolation(err) {
			return nil
		}
		return err
	}
}

func TestRunner_10000_jobs_on_8_workers_over_two_pools_take_effect_exactly_once(t *testing.T) {
	d := dbtest.Create(t)
	pools := []*database.DB{d.Open(t), d.Open(t)}
	// Unlogged: the test is about ownership, not durability, so it need not wait on this machine's fsync.
	mustExec(t, pools[0], `CREATE UNLOGGED TABLE effects (job_id uuid PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	client := newClient(t, pools[0])
	const total = 10_000
	reqs := make([]EnqueueRequest, total)
	for i := range reqs {
		reqs[i] = EnqueueRequest{Kind: "effect", Payload: map[string]int{"i": i}}
	}
	for i := 0; i < total; i += 2500 {
		if _, err := client.EnqueueMany(systemCtx(), reqs[i:i+2500]); err != nil {
			t.Fatal(err)
		}
	}

	var runs sync.Map
	var runners []*Runner
	for i, db := range pools {
		// Batches of 4 from both replicas contend for the same head of the queue.
		r := newTestRunner(t, db, Config{InstanceID: fmt.Sprintf("replica-%d", i), Workers: 4, BatchSize: 4},
			[]Kind{{Name: "effect", Handle: effectHandler(db, &runs)}}, nil)
		runners = append(runners, r)
	}
	start := time.Now()
	for _, r := range runners {
		startRunner(t, r)
	}
	waitFor(t, 90*time.Second, "all jobs completed", func() bool {
		return queryInt(t, pools[0], `SELECT count(*) FROM jobs WHERE status = 'completed'`) == total
	})
	elapsed := time.Since(start)

	if n := queryInt(t, pools[0], `SELECT count(*) FROM effects`); n != total {
		t.Fatalf("effects = %d, want %d", n, total)
	}
	if n := queryInt(t, pools[0], `SELECT count(*) FROM effects e JOIN jobs j ON j.id = e.job_id`); n != total {
		t.Fatalf("effects matching jobs = %d, want %d", n, total)
	}
	executions, twice := 0, 0
	runs.Range(func(_, v any) bool {
		executions++
		if v.(*atomic.Int64).Load() != 1 {
			twice++
		}
		return true
	})
	if executions != total || twice != 0 {
		t.Fatalf("%d jobs executed, %d more than once; want %d exactly once", executions, twice, total)
	}
	var won, lost, expiries float64
	for _, r := range runners {
		won += counter(t, r.metrics.claimsWon)
		lost += counter(t, r.metrics.claimsLost)
		expiries += counter(t, r.metrics.leaseExpiries)
	}
	if won != total {
		t.Fatalf("claims won = %v, want %d", won, total)
	}
	perReplica := queryInt(t, pools[0], `SELECT min(n) FROM (SELECT count(*) AS n FROM jobs GROUP BY claimed_by) c`)
	if perReplica == 0 || queryInt(t, pools[0], `SELECT count(DISTINCT claimed_by) FROM jobs`) != 2 {
		t.Fatalf("both replicas should have worked: min per replica %d", perReplica)
	}
	t.Logf("%d jobs in %s (%.0f jobs/s under -race); claims won %v, lost at the re-check %v, lease expiries %v; fewest by one replica %d",
		total, elapsed.Round(time.Millisecond), total/elapsed.Seconds(), won, lost, expiries, perReplica)
}

func TestRunner_failures_retry_with_backoff_then_fail_and_panics_count_as_failures(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	ctx := systemCtx()
	flaky, _ := client.Enqueue(ctx, "flaky", nil, EnqueueOptions{})
	doomed, _ := client.Enqueue(ctx, "panics", nil, EnqueueOptions{MaxAttempts: 2})
	var flakyRuns, panicRuns atomic.Int64
	r := newTestRunner(t, db, Config{InstanceID: "w", RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond}, []Kind{
		{Name: "flaky", Options: KindOptions{MaxAttempts: 5}, Handle: func(ctx context.Context, job Job) error {
			if flakyRuns.Add(1) < 3 {
				return errors.New("transient")
			}
			if job.Attempt != 3 || job.MaxAttempts != 5 {
				return fmt.Errorf("job attempt %d/%d, want 3/5", job.Attempt, job.MaxAttempts)
			}
			return nil
		}},
		{Name: "panics", Handle: func(ctx context.Context, job Job) error {
			panicRuns.Add(1)
			panic("handler bug")
		}},
	}, nil)
	startRunner(t, r)
	waitFor(t, 20*time.Second, "both jobs finished", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM jobs WHERE status IN ('completed', 'failed')`) == 2
	})
	if s := loadJob(t, db, flaky.ID); s.Status != "completed" || s.Attempt != 3 {
		t.Fatalf("flaky = %+v, want completed on attempt 3", s)
	}
	s := loadJob(t, db, doomed.ID)
	if s.Status != "failed" || s.Attempt != 2 || !strings.Contains(s.LastError, "panic: handler bug") {
		t.Fatalf("panicking job = %+v, want failed after 2 attempts with the panic recorded", s)
	}
	if panicRuns.Load() != 2 {
		t.Fatalf("panicking job ran %d times, want 2 (its MaxAttempts)", panicRuns.Load())
	}
	if f := counter(t, r.metrics.failures.WithLabelValues("flaky")); f != 2 {
		t.Fatalf("flaky failures metric = %v, want 2", f)
	}
}

func TestRunner_backoff_grows_exponentially_with_jitter_and_is_capped(t *testing.T) {
	r := &Runner{cfg: Config{RetryBase: time.Second, RetryMax: 10 * time.Second}}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 40: 10 * time.Second} {
		for range 50 {
			if got := r.backoff(attempt); got < want/2 || got > want {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", attempt, got, want/2, want)
			}
		}
	}
}

func TestRunner_extends_the_lease_of_a_long_job_so_no_other_replica_takes_it(t *testing.T) {
	d := dbtest.Create(t)
	pools := []*database.DB{d.Open(t), d.Open(t)}
	client := newClient(t, pools[0])
	res, _ := client.Enqueue(systemCtx(), "slow", nil, EnqueueOptions{})
	var runs atomic.Int64
	slow := Kind{Name: "slow", Handle: func(ctx context.Context, job Job) error {
		runs.Add(1)
		select {
		case <-time.After(6 * time.Second): // three leases long
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	for i, db := range pools {
		// Two seconds: a heartbeat has 500 ms to commit, which a loaded machine gives it; at 500 ms it had 125 ms.
		startRunner(t, newTestRunner(t, db, Config{InstanceID: fmt.Sprintf("r%d", i), Lease: 2 * time.Second}, []Kind{slow}, nil))
	}
	waitFor(t, 30*time.Second, "slow job completed", func() bool { return loadJob(t, pools[0], res.ID).Status == "completed" })
	if s := loadJob(t, pools[0], res.ID); s.Attempt != 1 || runs.Load() != 1 {
		t.Fatalf("slow job ran %d times, attempt %d; want once", runs.Load(), s.Attempt)
	}
}

func TestRunner_shutdown_finishes_short_jobs_and_releases_what_outlives_the_bound(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	ctx := systemCtx()
	quick, _ := client.Enqueue(ctx, "quick", nil, EnqueueOptions{})
	stuck, _ := client.Enqueue(ctx, "stuck", nil, EnqueueOptions{})
	started := make(chan string, 2)
	kinds := []Kind{
		{Name: "quick", Handle: func(ctx context.Context, job Job) error {
			started <- "quick"
			time.Sleep(300 * time.Millisecond) // shorter than the bound: finishes during shutdown
			return nil
		}},
		{Name: "stuck", Handle: func(ctx context.Context, job Job) error {
			started <- "stuck"
			<-ctx.Done() // ends only when shutdown gives up on it
			return ctx.Err()
		}},
	}
	// A bound ten times the quick job's 300 ms, so a loaded machine still finishes it within the bound.
	r := newTestRunner(t, db, Config{InstanceID: "w", ShutdownTimeout: 3 * time.Second}, kinds, nil)
	stop := startRunner(t, r)
	receive(t, started, 30*time.Second, "the first job started")
	receive(t, started, 30*time.Second, "the second job started")
	begin := time.Now()
	stop()
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("shutdown took %s, want about the 3s bound", took)
	}
	if s := loadJob(t, db, quick.ID); s.Status != "completed" {
		t.Fatalf("quick job = %+v, want completed during shutdown", s)
	}
	s := loadJob(t, db, stuck.ID)
	if s.Status != "pending" || s.Attempt != 0 || s.ClaimedBy != "" {
		t.Fatalf("stuck job = %+v, want released: pending, attempt not counted, unclaimed", s)
	}
}

func TestRunner_prunes_finished_jobs_past_retention_and_samples_depth(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	ctx := systemCtx()
	old, _ := client.Enqueue(ctx, "k", nil, EnqueueOptions{})
	recent, _ := client.Enqueue(ctx, "k", nil, EnqueueOptions{})
	waiting, _ := client.Enqueue(ctx, "k", nil, EnqueueOptions{RunAt: time.Now().Add(time.Hour)})
	mustExec(t, db, `UPDATE jobs SET status = 'completed', finished_at = now() - interval '2 hours' WHERE id = $1`, old.ID)
	mustExec(t, db, `UPDATE jobs SET status = 'failed', finished_at = now() WHERE id = $1`, recent.ID)
	r := newTestRunner(t, db, Config{InstanceID: "w", Retention: time.Hour, PruneInterval: 100 * time.Millisecond,
		DepthInterval: 50 * time.Millisecond}, []Kind{{Name: "k", Handle: func(context.Context, Job) error { return nil }}}, nil)
	startRunner(t, r)
	waitFor(t, 30*time.Second, "old job pruned", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM jobs WHERE id = $1`, old.ID) == 0
	})
	if n := queryInt(t, db, `SELECT count(*) FROM jobs WHERE id IN ($1, $2)`, recent.ID, waiting.ID); n != 2 {
		t.Fatalf("prune removed jobs inside retention or unfinished: %d left of 2", n)
	}
	waitFor(t, 30*time.Second, "depth gauge sampled", func() bool {
		return gauge(t, r, "pending") == 1 && gauge(t, r, "failed") == 1 && gauge(t, r, "completed") == 0
	})
}

func TestRunner_fenced_writes_of_a_stale_owner_change_nothing(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	ctx := systemCtx()
	res, _ := client.Enqueue(ctx, "k", nil, EnqueueOptions{})
	owner := newStore(db.SQL(), Config{InstanceID: "owner", Lease: time.Minute})
	got, _, err := owner.claim(ctx, []string{"k"}, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %d, %v", len(got), err)
	}
	before := loadJob(t, db, res.ID)
	stale := []struct {
		name string
		s    *store
		f    fence
	}{
		{"other instance", newStore(db.SQL(), Config{InstanceID: "intruder", Lease: time.Minute}), fence{res.ID, 1}},
		{"same instance, older attempt", owner, fence{res.ID, 0}},
	}
	for _, tc := range stale {
		ours, err := tc.s.complete(ctx, []fence{tc.f})
		noErr(t, err)
		released, err := tc.s.release(ctx, []fence{tc.f})
		noErr(t, err)
		extended, err := tc.s.extend(ctx, []fence{tc.f})
		noErr(t, err)
		retried, err := tc.s.retry(ctx, tc.f, 0, "x")
		noErr(t, err)
		failed, err := tc.s.fail(ctx, tc.f, "x")
		noErr(t, err)
		if len(ours)+len(released)+len(extended) != 0 || retried || failed {
			t.Errorf("%s: a stale write matched the row", tc.name)
		}
		if after := loadJob(t, db, res.ID); after != before {
			t.Errorf("%s: row changed from %+v to %+v", tc.name, before, after)
		}
	}
	ours, err := owner.complete(ctx, []fence{{res.ID, 1}})
	if err != nil || !ours[res.ID] {
		t.Fatalf("owner's completion = %v, %v", ours, err)
	}
}

func TestNewRunner_rejects_bad_registrations(t *testing.T) {
	db := dbtest.New(t)
	ok := func(context.Context, Job) error { return nil }
	run := func(context.Context) error { return nil }
	cases := map[string]struct {
		cfg       Config
		kinds     []Kind
		schedules []Schedule
	}{
		"no instance id":      {Config{}, nil, nil},
		"nameless kind":       {Config{InstanceID: "a"}, []Kind{{Handle: ok}}, nil},
		"kind without Handle": {Config{InstanceID: "a"}, []Kind{{Name: "k"}}, nil},
		"duplicate kind":      {Config{InstanceID: "a"}, []Kind{{Name: "k", Handle: ok}, {Name: "k", Handle: ok}}, nil},
		"zero interval":       {Config{InstanceID: "a"}, nil, []Schedule{{Name: "s", Run: run}}},
		"reserved schedule":   {Config{InstanceID: "a"}, nil, []Schedule{{Name: "jobs.prune", Interval: time.Second, Run: run}}},
		"tiny lease":          {Config{InstanceID: "a", Lease: time.Millisecond}, nil, nil},
	}
	for name, tc := range cases {
		if _, err := NewRunner(db, tc.cfg, tc.kinds, tc.schedules, testLogger(), newRegistry()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewRunner(nil, Config{InstanceID: "a"}, nil, nil, testLogger(), newRegistry()); err == nil {
		t.Error("nil db accepted")
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
