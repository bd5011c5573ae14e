package jobs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/tenancy"
)

func TestA_job_runs_for_the_tenant_it_was_enqueued_for_and_one_enqueued_in_a_system_context_in_one_named_after_its_kind(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	other := dbtest.Tenant(t, db, "other")

	type seen struct {
		tenant uuid.UUID
		reason string
	}
	var mu sync.Mutex
	got := map[string]seen{}
	kind := Kind{Name: "record", Handle: func(ctx context.Context, job Job) error {
		var name string
		if err := job.Decode(&name); err != nil {
			return err
		}
		tenant, _ := tenancy.From(ctx)
		reason, _ := tenancy.SystemReason(ctx)
		mu.Lock()
		got[name] = seen{tenant, reason}
		mu.Unlock()
		return nil
	}}
	for name, ctx := range map[string]context.Context{
		"default": tenancy.With(context.Background(), tenancy.DefaultID),
		"other":   tenancy.With(context.Background(), other),
		"system":  tenancy.System(context.Background(), "test"),
	} {
		if _, err := client.Enqueue(ctx, kind.Name, name, EnqueueOptions{}); err != nil {
			t.Fatalf("enqueue %s: %v", name, err)
		}
	}
	if _, err := client.EnqueueMany(tenancy.With(context.Background(), other), []EnqueueRequest{{Kind: kind.Name, Payload: "many"}}); err != nil {
		t.Fatalf("enqueue many: %v", err)
	}
	startRunner(t, newTestRunner(t, db, Config{InstanceID: "a"}, []Kind{kind}, nil))
	waitFor(t, 20*time.Second, "four jobs ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 4
	})
	want := map[string]seen{
		"default": {tenant: tenancy.DefaultID},
		"other":   {tenant: other},
		"many":    {tenant: other},
		"system":  {reason: "job record"},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("job %s ran with tenant %s, system %q; want %s, %q", name, got[name].tenant, got[name].reason, w.tenant, w.reason)
		}
	}
}

func TestEnqueueing_with_neither_a_tenant_nor_a_system_context_is_refused_and_writes_nothing(t *testing.T) {
	db := dbtest.New(t)
	client := newClient(t, db)
	bare := context.Background()
	if _, err := client.Enqueue(bare, "orphan", nil, EnqueueOptions{}); !errors.Is(err, tenancy.ErrNoTenant) {
		t.Errorf("Enqueue = %v, want tenancy.ErrNoTenant", err)
	}
	if _, err := client.Enqueue(bare, "orphan", nil, EnqueueOptions{DedupeKey: "k"}); !errors.Is(err, tenancy.ErrNoTenant) {
		t.Errorf("Enqueue with a dedupe key = %v, want tenancy.ErrNoTenant", err)
	}
	if _, err := client.EnqueueMany(bare, []EnqueueRequest{{Kind: "orphan"}}); !errors.Is(err, tenancy.ErrNoTenant) {
		t.Errorf("EnqueueMany = %v, want tenancy.ErrNoTenant", err)
	}
	// Inside a unit of work the refusal comes before any statement, so the caller's writes are not aborted.
	err := db.WithTx(bare, func(ctx context.Context) error {
		if _, err := client.Enqueue(ctx, "orphan", nil, EnqueueOptions{}); !errors.Is(err, tenancy.ErrNoTenant) {
			t.Errorf("Enqueue in a unit of work = %v, want tenancy.ErrNoTenant", err)
		}
		return db.Conn(ctx).Exec(`SELECT 1`).Error
	})
	if err != nil {
		t.Fatalf("the unit of work after a refused enqueue: %v", err)
	}
	if n := queryInt(t, db, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("refused enqueues wrote %d jobs", n)
	}
}

func TestA_schedule_enqueues_jobs_in_its_named_system_context_and_another_replica_runs_them_in_one(t *testing.T) {
	d := dbtest.Create(t)
	scheduler, worker := d.Open(t), d.Open(t)
	client := newClient(t, scheduler)
	enqueued := make(chan string, 1)
	sweep := Schedule{Name: "sweep", Interval: time.Hour, Run: func(ctx context.Context) error {
		reason, _ := tenancy.SystemReason(ctx)
		_, err := client.Enqueue(ctx, "swept", reason, EnqueueOptions{DedupeKey: "once"})
		select {
		case enqueued <- reason:
		default:
		}
		return err
	}}
	ran := make(chan [2]string, 1)
	swept := Kind{Name: "swept", Handle: func(ctx context.Context, job Job) error {
		var enqueuedIn string
		if err := job.Decode(&enqueuedIn); err != nil {
			return err
		}
		if _, ok := tenancy.From(ctx); ok {
			return errors.New("a system job ran with a tenant")
		}
		reason, _ := tenancy.SystemReason(ctx)
		select {
		case ran <- [2]string{enqueuedIn, reason}:
		default:
		}
		return nil
	}}
	startRunner(t, newTestRunner(t, scheduler, Config{InstanceID: "scheduler"}, nil, []Schedule{sweep}))
	startRunner(t, newTestRunner(t, worker, Config{InstanceID: "worker"}, []Kind{swept}, nil))

	select {
	case got := <-ran:
		if got != [2]string{"schedule sweep", "job swept"} {
			t.Fatalf("enqueued in %q, ran in %q; want the schedule's context and one named after the kind", got[0], got[1])
		}
	case <-time.After(30 * time.Second):
		select {
		case reason := <-enqueued:
			t.Fatalf("the schedule ran (in %q) but its job did not run within 30s", reason)
		default:
			t.Fatal("the schedule did not run within 30s")
		}
	}
	if n := queryInt(t, worker, `SELECT count(*) FROM jobs WHERE kind = 'swept' AND tenant_id IS NULL`); n != 1 {
		t.Fatalf("system jobs stored = %d, want 1 with no tenant", n)
	}
}
