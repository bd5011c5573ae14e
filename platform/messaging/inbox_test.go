package messaging_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

func createEffects(t *testing.T, db *database.DB) {
	t.Helper()
	if err := db.Gorm().Exec(`CREATE TABLE effects (id bigserial PRIMARY KEY, message_id text NOT NULL)`).Error; err != nil {
		t.Fatal(err)
	}
}

func effects(t *testing.T, db *database.DB, messageID string) int64 {
	t.Helper()
	var n int64
	if err := db.Gorm().Raw(`SELECT count(*) FROM effects WHERE message_id = ?`, messageID).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func recordEffect(db *database.DB, id string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return db.Conn(ctx).Exec(`INSERT INTO effects (message_id) VALUES (?)`, id).Error
	}
}

// Concurrent and sequential duplicates of one message id take effect once; a failed attempt
// records nothing, so the next delivery runs again.
func TestProcessOnceRunsOncePerMessage(t *testing.T) {
	db := dbtest.New(t)
	createEffects(t, db)
	ctx := context.Background()

	var wg sync.WaitGroup
	var errs atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := messaging.ProcessOnce(ctx, db, "billing", "m-1", recordEffect(db, "m-1")); err != nil {
				errs.Add(1)
				t.Errorf("ProcessOnce: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := effects(t, db, "m-1"); n != 1 {
		t.Errorf("16 concurrent deliveries gave %d effects, want 1", n)
	}

	boom := errors.New("boom")
	err := messaging.ProcessOnce(ctx, db, "billing", "m-2", func(ctx context.Context) error {
		if err := recordEffect(db, "m-2")(ctx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failing fn: err = %v, want boom", err)
	}
	if n := effects(t, db, "m-2"); n != 0 {
		t.Errorf("failed attempt left %d effects", n)
	}
	if err := messaging.ProcessOnce(ctx, db, "billing", "m-2", recordEffect(db, "m-2")); err != nil {
		t.Fatal(err)
	}
	if err := messaging.ProcessOnce(ctx, db, "other", "m-2", recordEffect(db, "m-2")); err != nil {
		t.Fatal(err)
	}
	if n := effects(t, db, "m-2"); n != 2 {
		t.Errorf("retry + other consumer gave %d effects, want 2", n)
	}
}

// The same event delivered twice through RabbitMQ (published by two transactions) has one effect.
func TestDuplicateDeliveryHasOneEffect(t *testing.T) {
	db := dbtest.New(t)
	createEffects(t, db)
	relay, pub := newOutbox(t, db)
	cfg := testConfig(t, "effects")

	var deliveries atomic.Int64
	handle := func(ctx context.Context, e messaging.Event) error {
		deliveries.Add(1)
		return messaging.ProcessOnce(ctx, db, "effects", e.ID, recordEffect(db, e.ID))
	}
	startBus(t, cfg, relay, messaging.Subscription{Consumer: "effects", EventTypes: []string{"test.created"}, Handle: handle})

	e, err := messaging.NewEvent(tenancy.With(context.Background(), tenancy.DefaultID), "test", "test.created", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := db.WithTx(context.Background(), func(ctx context.Context) error { return pub.Publish(ctx, e) }); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "two deliveries", func() bool { return deliveries.Load() == 2 })
	if n := effects(t, db, e.ID); n != 1 {
		t.Errorf("two deliveries gave %d effects, want 1", n)
	}
}

func TestPruneInboxDeletesOnlyOldRows(t *testing.T) {
	db := dbtest.New(t)
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	for _, id := range []string{"old", "new"} {
		if err := messaging.ProcessOnce(ctx, db, "c", id, noop); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Gorm().Exec(`UPDATE inbox_messages SET processed_at = now() - interval '40 days' WHERE message_id = 'old'`).Error; err != nil {
		t.Fatal(err)
	}
	n, err := messaging.PruneInbox(ctx, db, 30*24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("PruneInbox = %d, %v; want 1, nil", n, err)
	}
	ran := false
	if err := messaging.ProcessOnce(ctx, db, "c", "new", func(context.Context) error { ran = true; return nil }); err != nil || ran {
		t.Fatalf("recent message ran again (ran=%v, err=%v)", ran, err)
	}
}
