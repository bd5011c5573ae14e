package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/tenancy"
)

// A foreign key from jobs to tenants made every enqueue take KEY SHARE on the tenant's row: a FOR
// UPDATE held on that row shows it, as the enqueue then waits for the lock.
func TestEnqueueing_a_tenants_job_takes_no_lock_on_the_tenants_row(t *testing.T) {
	d := dbtest.Create(t)
	holder, replica := d.Open(t), d.Open(t)
	client := newClient(t, replica)
	tenant := dbtest.Tenant(t, holder, "hot")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := holder.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE`, tenant); err != nil {
		t.Fatal(err)
	}

	enqueueCtx, stop := context.WithTimeout(tenancy.With(ctx, tenant), 15*time.Second)
	defer stop()
	res, err := client.Enqueue(enqueueCtx, "hot", nil, EnqueueOptions{})
	if err != nil {
		t.Fatalf("enqueue while the tenant's row is locked: %v (a foreign key to tenants would wait for the lock)", err)
	}
	if n := queryInt(t, replica, `SELECT count(*) FROM jobs WHERE id = $1 AND tenant_id = $2`, res.ID, tenant); n != 1 {
		t.Fatalf("job rows for the tenant = %d, want 1", n)
	}
}
