package jobs

import (
	"fmt"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

type scheduleRun struct {
	instance string
	start    time.Time
	end      *time.Time
}

func TestSchedule_three_schedulers_never_overlap_and_runs_go_on_after_the_holder_is_SIGKILLed(t *testing.T) {
	d := dbtest.Create(t)
	db := d.Open(t)
	mustExec(t, db, `CREATE TABLE schedule_runs (id bigserial PRIMARY KEY, instance text NOT NULL,
		started_at timestamptz NOT NULL, finished_at timestamptz)`)

	holder := startHelper(t, "schedule", d.URL, "sched-a")
	waitFor(t, 60*time.Second, "the helper process to run the schedule", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM schedule_runs WHERE instance = 'sched-a'`) > 0
	})
	var joined time.Time
	if err := db.SQL().QueryRow(`SELECT clock_timestamp()`).Scan(&joined); err != nil {
		t.Fatal(err)
	}
	var stops []func()
	for _, name := range []string{"sched-b", "sched-c"} {
		pool := d.Open(t)
		stops = append(stops, startRunner(t, newTestRunner(t, pool, Config{InstanceID: name, Lease: 3 * time.Second, PollInterval: 50 * time.Millisecond},
			nil, []Schedule{tickSchedule(pool, name, 200*time.Millisecond)})))
	}
	// Three schedulers contend (ticks are due every 50ms; the helper's runs last a second, the others' 200ms)
	// until the helper is killed while it holds the schedule. A holder keeps winning while the others wait
	// out its lease, so the helper, first to hold, is caught in its next run; once another
	// won, the helper could be kept out for long.
	waitFor(t, 60*time.Second, "the helper process to hold the schedule", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM schedule_runs WHERE instance = 'sched-a' AND finished_at IS NULL
			AND started_at > $1 AND started_at > clock_timestamp() - interval '120 milliseconds'`, joined) == 1
	})
	holder.kill(t)
	var killedAt time.Time
	if err := db.SQL().QueryRow(`SELECT clock_timestamp()`).Scan(&killedAt); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "5 runs after the kill", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM schedule_runs WHERE started_at > $1`, killedAt) >= 5
	})

	for _, stop := range stops {
		stop() // the survivors finish their run in progress, so every run but the killed one has an end
	}

	runs := loadRuns(t, db)
	unfinished := 0
	for i, r := range runs {
		end := killedAt // the killed run never recorded an end: it lasted at most until the kill
		if r.end != nil {
			end = *r.end
		} else if unfinished++; r.instance != "sched-a" || r.start.After(killedAt) || unfinished > 1 {
			t.Fatalf("run %d by %s started %s has no end; only the killed holder's last run may", i, r.instance, r.start)
		}
		if i+1 < len(runs) && runs[i+1].start.Before(end) {
			t.Fatalf("runs overlap: %s ran %s–%s and %s started at %s",
				r.instance, r.start.Format(time.StampMicro), end.Format(time.StampMicro), runs[i+1].instance, runs[i+1].start.Format(time.StampMicro))
		}
	}
	if unfinished != 1 {
		t.Fatalf("%d runs without an end, want exactly the killed holder's", unfinished)
	}
	after := 0
	for _, r := range runs {
		if r.start.After(killedAt) {
			after++
			if r.instance == "sched-a" {
				t.Fatalf("the killed process ran again")
			}
		}
	}
	first := runs[0].start
	t.Logf("%d runs over %s (%d with three schedulers before the kill, %d after it by the survivors); the first run after the kill started %s after it",
		len(runs), runs[len(runs)-1].start.Sub(first).Round(time.Millisecond), countBetween(runs, joined, killedAt), after,
		firstAfter(runs, killedAt).Sub(killedAt).Round(time.Millisecond))
}

func loadRuns(t *testing.T, db *database.DB) []scheduleRun {
	t.Helper()
	rows, err := db.SQL().Query(`SELECT instance, started_at, finished_at FROM schedule_runs ORDER BY started_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var runs []scheduleRun
	for rows.Next() {
		var r scheduleRun
		if err := rows.Scan(&r.instance, &r.start, &r.end); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(runs) == 0 {
		t.Fatal(fmt.Errorf("no runs"))
	}
	return runs
}

func countBetween(runs []scheduleRun, from, to time.Time) int {
	n := 0
	for _, r := range runs {
		if r.start.After(from) && r.start.Before(to) {
			n++
		}
	}
	return n
}

func firstAfter(runs []scheduleRun, at time.Time) time.Time {
	for _, r := range runs {
		if r.start.After(at) {
			return r.start
		}
	}
	return at
}

func TestSchedule_a_holder_stopped_between_runs_is_replaced_within_an_interval_not_a_lease(t *testing.T) {
	d := dbtest.Create(t)
	db := d.Open(t)
	mustExec(t, db, `CREATE TABLE schedule_runs (id bigserial PRIMARY KEY, instance text NOT NULL,
		started_at timestamptz NOT NULL, finished_at timestamptz)`)
	stops := map[string]func(){}
	for _, name := range []string{"sched-a", "sched-b"} {
		pool := d.Open(t)
		// A minute of lease: a replica waiting out the holder's lease would not run again within this test.
		stops[name] = startRunner(t, newTestRunner(t, pool, Config{InstanceID: name, Lease: time.Minute, PollInterval: 50 * time.Millisecond},
			nil, []Schedule{tickSchedule(pool, name, 10*time.Millisecond)}))
	}
	waitFor(t, 30*time.Second, "20 runs", func() bool { return queryInt(t, db, `SELECT count(*) FROM schedule_runs`) >= 20 })
	var holder string
	if err := db.SQL().QueryRow(`SELECT instance FROM schedule_runs ORDER BY started_at DESC LIMIT 1`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"sched-a": "sched-b", "sched-b": "sched-a"}[holder]
	stops[holder]() // between runs, or it finishes the one in progress: the schedule is free at once
	var stoppedAt time.Time
	if err := db.SQL().QueryRow(`SELECT clock_timestamp()`).Scan(&stoppedAt); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, other+" running the schedule after "+holder+" stopped", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM schedule_runs WHERE instance = $1 AND started_at > $2`, other, stoppedAt) > 0
	})
}
