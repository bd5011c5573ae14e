package jobs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/tenancy"
)

func TestA_job_runs_for_the_tenant_it_was_enqueued_for_and_one_without_in_a_named_system_context(t *testing.T) {
	db := dbtest.New(t)
	client, err := NewClient(db)
	if err != nil {
		t.Fatal(err)
	}
	other := uuid.New()
	mustExec(t, db, `INSERT INTO tenants (id, name) VALUES ($1, 'other')`, other)

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
