package jobs

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

func TestEnqueue_in_a_rolled_back_unit_of_work_leaves_nothing(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	boom := errors.New("business rule failed")
	var id uuid.UUID
	err := db.WithTx(systemCtx(), func(ctx context.Context) error {
		res, err := client.Enqueue(ctx, "email", map[string]string{"to": "a@example.com"}, EnqueueOptions{})
		if err != nil {
			return err
		}
		id = res.ID
		if n := queryInt(t, db, `SELECT count(*) FROM jobs`); n != 0 {
			t.Errorf("job visible outside the unit of work before commit: %d", n)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WithTx = %v, want the business error", err)
	}
	if id == uuid.Nil {
		t.Fatal("Enqueue returned no id")
	}
	if n := queryInt(t, db, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("rolled-back enqueue left %d jobs", n)
	}
}

func TestEnqueue_commits_with_the_callers_unit_of_work(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	var id uuid.UUID
	err := db.WithTx(systemCtx(), func(ctx context.Context) error {
		res, err := client.Enqueue(ctx, "email", map[string]int{"n": 1}, EnqueueOptions{MaxAttempts: 3})
		id = res.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := loadJob(t, db, id)
	if got.Status != "pending" || got.Attempt != 0 {
		t.Fatalf("job = %+v, want pending attempt 0", got)
	}
	if v := id.Version(); v != 7 {
		t.Fatalf("id version = %d, want 7", v)
	}
	if n := queryInt(t, db, `SELECT max_attempts FROM jobs WHERE id = $1`, id); n != 3 {
		t.Fatalf("max_attempts = %d, want 3", n)
	}
}

func TestEnqueue_duplicate_dedupe_key_inside_a_caller_tx_keeps_the_tx_usable(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	ctx := systemCtx()
	mustExec(t, db, `CREATE TABLE orders (id int PRIMARY KEY)`)
	first, err := client.Enqueue(ctx, "invoice", 1, EnqueueOptions{DedupeKey: "order-1"})
	if err != nil || first.Duplicate {
		t.Fatalf("first enqueue = %+v, %v", first, err)
	}

	err = db.WithTx(ctx, func(ctx context.Context) error {
		if err := db.Conn(ctx).Exec(`INSERT INTO orders VALUES (1)`).Error; err != nil {
			return err
		}
		dup, err := client.Enqueue(ctx, "invoice", 1, EnqueueOptions{DedupeKey: "order-1"})
		if err != nil {
			return err
		}
		if !dup.Duplicate || dup.ID != first.ID {
			t.Errorf("duplicate enqueue = %+v, want Duplicate with id %s", dup, first.ID)
		}
		// The transaction must still accept writes after the 23505 inside it.
		return db.Conn(ctx).Exec(`INSERT INTO orders VALUES (2)`).Error
	})
	if err != nil {
		t.Fatalf("caller tx after a duplicate: %v", err)
	}
	if n := queryInt(t, db, `SELECT count(*) FROM orders`); n != 2 {
		t.Fatalf("orders = %d, want 2 (the caller's writes committed)", n)
	}
	if n := queryInt(t, db, `SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("jobs = %d, want 1", n)
	}
}

func TestEnqueue_duplicate_outside_a_tx_and_again_after_the_job_finished(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	ctx := systemCtx()
	first, err := client.Enqueue(ctx, "sync", nil, EnqueueOptions{DedupeKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := client.Enqueue(ctx, "sync", nil, EnqueueOptions{DedupeKey: "k"})
	if err != nil || !dup.Duplicate || dup.ID != first.ID {
		t.Fatalf("duplicate = %+v, %v; want Duplicate of %s", dup, err, first.ID)
	}
	other, err := client.Enqueue(ctx, "other-kind", nil, EnqueueOptions{DedupeKey: "k"})
	if err != nil || other.Duplicate {
		t.Fatalf("same key, other kind = %+v, %v; want a new job", other, err)
	}
	mustExec(t, db, `UPDATE jobs SET status = 'completed', finished_at = now() WHERE id = $1`, first.ID)
	again, err := client.Enqueue(ctx, "sync", nil, EnqueueOptions{DedupeKey: "k"})
	if err != nil || again.Duplicate || again.ID == first.ID {
		t.Fatalf("after completion = %+v, %v; want a new job", again, err)
	}
}

func TestEnqueue_concurrent_same_dedupe_key_from_two_pools_creates_one_job(t *testing.T) {
	d := dbtest.Create(t)
	pools := []*database.DB{d.Open(t), d.Open(t)}
	const goroutines = 20
	results := make(chan EnqueueResult, goroutines)
	errs := make(chan error, goroutines)
	for i := range goroutines {
		client := newClient(t, pools[i%2])
		go func() {
			res, err := client.Enqueue(systemCtx(), "sync", i, EnqueueOptions{DedupeKey: "same"})
			results <- res
			errs <- err
		}()
	}
	created := 0
	for range goroutines {
		if err := <-errs; err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		if res := <-results; !res.Duplicate {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d enqueues created a job, want exactly 1", created)
	}
	if n := queryInt(t, pools[0], `SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("jobs = %d, want 1", n)
	}
}

func TestEnqueueMany_mixes_bulk_and_deduplicated_jobs_in_one_unit_of_work(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	ctx := systemCtx()
	existing, _ := client.Enqueue(ctx, "sync", nil, EnqueueOptions{DedupeKey: "a"})
	res, err := client.EnqueueMany(ctx, []EnqueueRequest{
		{Kind: "bulk", Payload: 1},
		{Kind: "sync", Options: EnqueueOptions{DedupeKey: "a"}},
		{Kind: "bulk", Payload: 2, Options: EnqueueOptions{MaxAttempts: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || res[2].Duplicate || !res[1].Duplicate || res[1].ID != existing.ID {
		t.Fatalf("results = %+v", res)
	}
	if n := queryInt(t, db, `SELECT count(*) FROM jobs`); n != 3 {
		t.Fatalf("jobs = %d, want 3", n)
	}
}

func TestEnqueue_rejects_bad_input_and_writes_nothing(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	ctx := systemCtx()
	if _, err := client.Enqueue(ctx, "", nil, EnqueueOptions{}); err == nil {
		t.Error("empty kind accepted")
	}
	if _, err := client.Enqueue(ctx, "k", make(chan int), EnqueueOptions{}); err == nil {
		t.Error("unencodable payload accepted")
	}
	if _, err := client.Enqueue(ctx, "k", nil, EnqueueOptions{MaxAttempts: -1}); err == nil {
		t.Error("negative MaxAttempts accepted")
	}
	if n := queryInt(t, db, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("jobs = %d, want 0", n)
	}
	if _, err := NewClient(nil); err == nil {
		t.Error("NewClient(nil) accepted")
	}
}

func TestCancel_stops_a_pending_job_only(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	ctx := systemCtx()
	res, _ := client.Enqueue(ctx, "k", nil, EnqueueOptions{})
	ok, err := client.Cancel(ctx, res.ID)
	if err != nil || !ok {
		t.Fatalf("Cancel = %v, %v", ok, err)
	}
	if s := loadJob(t, db, res.ID); s.Status != "cancelled" {
		t.Fatalf("status = %s", s.Status)
	}
	if ok, _ := client.Cancel(ctx, res.ID); ok {
		t.Fatal("cancelled twice")
	}
}
