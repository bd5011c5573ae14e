package messaging_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

func TestAnEventsHandlerActsForTheTenantTheEventWasPublishedFor(t *testing.T) {
	db := dbtest.New(t)
	relay, pub := newOutbox(t, db)
	other := dbtest.Tenant(t, db, "other")
	var mu sync.Mutex
	tenants := map[string]uuid.UUID{}
	handle := func(ctx context.Context, e messaging.Event) error {
		tenant, _ := tenancy.From(ctx)
		mu.Lock()
		tenants[e.ID] = tenant
		mu.Unlock()
		return nil
	}
	startBus(t, testConfig(t, "tenants"), relay, messaging.Subscription{Consumer: "tenants", EventTypes: []string{"test.created"}, Handle: handle})

	want := map[string]uuid.UUID{}
	for _, tenant := range []uuid.UUID{tenancy.DefaultID, other} {
		ctx := tenancy.With(context.Background(), tenant)
		e, err := messaging.NewEvent(ctx, "test", "test.created", map[string]int{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		if e.TenantID != tenant {
			t.Fatalf("NewEvent took tenant %s from ctx, want %s", e.TenantID, tenant)
		}
		if err := db.WithTx(ctx, func(ctx context.Context) error { return pub.Publish(ctx, e) }); err != nil {
			t.Fatal(err)
		}
		want[e.ID] = tenant
	}
	waitFor(t, 30*time.Second, "both events handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(tenants) == 2
	})
	for id, tenant := range want {
		if tenants[id] != tenant {
			t.Errorf("event %s handled acting for %s, want %s", id, tenants[id], tenant)
		}
	}

	// An event without a tenant is refused at the outbox: every event belongs to one tenant.
	e, err := messaging.NewEvent(tenancy.System(context.Background(), "test"), "test", "test.created", map[string]int{"n": 2})
	if err != nil {
		t.Fatal(err)
	}
	err = db.WithTx(context.Background(), func(ctx context.Context) error { return pub.Publish(ctx, e) })
	if !errors.Is(err, tenancy.ErrNoTenant) {
		t.Fatalf("publish without tenant: %v, want ErrNoTenant", err)
	}
}
