package outbox

import (
	"context"
	"errors"
	"testing"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

// The wake travels only from a publisher to the relay it was given, and only once the unit of work commits.
func TestACommitWakesTheRelayItsPublisherWasGivenAndARollbackDoesNot(t *testing.T) {
	db := dbtest.New(t)
	relay, err := NewRelay(db)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(db, relay)
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenancy.With(context.Background(), tenancy.DefaultID)
	publish := func(commit bool) {
		e, err := messaging.NewEvent(ctx, "test", "test.created", map[string]int{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		rollback := errors.New("rollback")
		pending := len(relay.wake)
		err = db.WithTx(ctx, func(ctx context.Context) error {
			if err := pub.Publish(ctx, e); err != nil {
				return err
			}
			if len(relay.wake) != pending {
				t.Error("the relay was woken before the commit")
			}
			if !commit {
				return rollback
			}
			return nil
		})
		if commit && err != nil || !commit && !errors.Is(err, rollback) {
			t.Fatalf("unit of work (commit %v): %v", commit, err)
		}
	}

	publish(false)
	if len(relay.wake) != 0 {
		t.Fatal("a rolled back publish woke the relay")
	}
	publish(true)
	if len(relay.wake) != 1 {
		t.Fatal("a committed publish did not wake the relay")
	}
	publish(true) // a wake still pending is enough: the second never blocks
	if len(relay.wake) != 1 {
		t.Fatalf("%d wakes pending, want 1", len(relay.wake))
	}
}

func TestAPublisherRefusesARelayOfAnotherDatabase(t *testing.T) {
	relay, err := NewRelay(dbtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPublisher(dbtest.New(t), relay); err == nil {
		t.Fatal("a publisher was wired to the relay of another database")
	}
}
