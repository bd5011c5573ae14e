package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

func TestRunner_jobs_of_a_SIGKILLed_worker_complete_elsewhere_after_the_lease_and_its_late_writes_change_nothing(t *testing.T) {
	d := dbtest.Create(t)
	db := d.Open(t)
	mustExec(t, db, `CREATE TABLE started (job_id uuid NOT NULL, instance text NOT NULL)`)
	mustExec(t, db, `CREATE TABLE effects (job_id uuid PRIMARY KEY)`)
	client := newClient(t, db)
	const total = 10
	for i := range total {
		if _, err := client.Enqueue(systemCtx(), "block", i, EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	doomed := startHelper(t, "jobs", d.URL, "doomed")
	waitFor(t, 60*time.Second, "the helper process to hold every job", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM started WHERE instance = 'doomed'`) == total &&
			queryInt(t, db, `SELECT count(*) FROM jobs WHERE status = 'processing' AND claimed_by = 'doomed'`) == total
	})
	doomed.kill(t)
	var leaseEnd time.Time
	if err := db.SQL().QueryRow(`SELECT min(lease_expires_at) FROM jobs`).Scan(&leaseEnd); err != nil {
		t.Fatal(err)
	}

	gate := make(chan struct{})
	survivor := newTestRunner(t, db, Config{InstanceID: "survivor", Lease: 2 * time.Second}, []Kind{{Name: "block",
		Handle: func(ctx context.Context, job Job) error {
			if err := db.Conn(ctx).Exec(`INSERT INTO effects (job_id) VALUES (?)`, job.ID).Error; err != nil && !database.IsUniqueViolation(err) {
				return err
			}
			select {
			case <-gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}}, nil)
	startRunner(t, survivor)
	waitFor(t, 30*time.Second, "the survivor to take over every job", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM jobs WHERE status = 'processing' AND claimed_by = 'survivor' AND attempt = 2`) == total
	})
	if n := queryInt(t, db, `SELECT count(*) FROM jobs WHERE updated_at < $1`, leaseEnd); n != 0 {
		t.Fatalf("%d jobs were taken over before the dead worker's lease ended", n)
	}

	// The dead worker's writes, as if it came back: fenced by claimed_by and attempt, they match nothing.
	ids := jobIDs(t, db)
	stale := newStore(db.SQL(), Config{InstanceID: "doomed", Lease: 2 * time.Second})
	assertStaleWritesChangeNothing(t, db, stale, ids, 1)

	close(gate)
	waitFor(t, 30*time.Second, "every job completed", func() bool {
		return queryInt(t, db, `SELECT count(*) FROM jobs WHERE status = 'completed' AND claimed_by = 'survivor'`) == total
	})
	if n := queryInt(t, db, `SELECT count(*) FROM effects`); n != total {
		t.Fatalf("effects = %d, want %d", n, total)
	}
	if got := counter(t, survivor.metrics.leaseExpiries); got != total {
		t.Fatalf("lease expiries metric = %v, want %d", got, total)
	}
	assertStaleWritesChangeNothing(t, db, stale, ids, 1)
}

func jobIDs(t *testing.T, db *database.DB) []uuid.UUID {
	t.Helper()
	rows, err := db.SQL().Query(`SELECT id FROM jobs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func assertStaleWritesChangeNothing(t *testing.T, db *database.DB, stale *store, ids []uuid.UUID, attempt int) {
	t.Helper()
	ctx := context.Background()
	before := map[uuid.UUID]jobState{}
	fences := make([]fence, len(ids))
	for i, id := range ids {
		before[id] = loadJob(t, db, id)
		fences[i] = fence{id, attempt}
	}
	for name, write := range map[string]func() (int, error){
		"complete": func() (int, error) { m, err := stale.complete(ctx, fences); return len(m), err },
		"release":  func() (int, error) { m, err := stale.release(ctx, fences); return len(m), err },
		"extend":   func() (int, error) { m, err := stale.extend(ctx, fences); return len(m), err },
		"retry": func() (int, error) {
			ok, err := stale.retry(ctx, fences[0], 0, "late")
			return boolInt(ok), err
		},
		"fail": func() (int, error) { ok, err := stale.fail(ctx, fences[0], "late"); return boolInt(ok), err },
	} {
		n, err := write()
		if err != nil {
			t.Fatalf("stale %s: %v", name, err)
		}
		if n != 0 {
			t.Fatalf("stale %s matched %d jobs, want 0", name, n)
		}
	}
	for _, id := range ids {
		if after := loadJob(t, db, id); after != before[id] {
			t.Fatalf("job %s changed under stale writes: %+v → %+v", id, before[id], after)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
