package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/keelson/keelson/platform/correlation"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/outbox"
	"github.com/keelson/keelson/platform/tenancy"
)

type row struct {
	UUID     string
	Payload  string
	Metadata string
}

func rows(t *testing.T, db *database.DB) []row {
	t.Helper()
	var out []row
	if err := db.Gorm().Raw(`SELECT uuid, payload::text AS payload, metadata::text AS metadata FROM outbox_messages ORDER BY "offset"`).Scan(&out).Error; err != nil {
		t.Fatalf("read outbox: %v", err)
	}
	return out
}

func newEvent(t *testing.T, ctx context.Context) messaging.Event {
	t.Helper()
	e, err := messaging.NewEvent(tenancy.With(ctx, tenancy.DefaultID), "proposals", "proposal.accepted", map[string]string{"proposal_id": "p-1"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestPublishWithoutTransactionFailsAndWritesNothing(t *testing.T) {
	db := dbtest.New(t)
	pub, err := outbox.NewPublisher(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := pub.Publish(ctx, newEvent(t, ctx)); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Publish without a transaction: err = %v, want ErrNoTransaction", err)
	}
	if got := rows(t, db); len(got) != 0 {
		t.Fatalf("outbox has %d rows, want 0", len(got))
	}
}

func TestPublishFollowsTheTransaction(t *testing.T) {
	db := dbtest.New(t)
	pub, err := outbox.NewPublisher(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := correlation.With(context.Background(), "req-42")
	rollback := errors.New("rollback")

	lost := newEvent(t, ctx)
	err = db.WithTx(ctx, func(ctx context.Context) error {
		if err := pub.Publish(ctx, lost); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatalf("rolled back unit of work: %v", err)
	}
	if got := rows(t, db); len(got) != 0 {
		t.Fatalf("rolled back event left %d rows", len(got))
	}

	kept := newEvent(t, ctx)
	if err := db.WithTx(ctx, func(ctx context.Context) error { return pub.Publish(ctx, kept) }); err != nil {
		t.Fatalf("commit: %v", err)
	}
	got := rows(t, db)
	if len(got) != 1 {
		t.Fatalf("outbox has %d rows, want 1", len(got))
	}
	// The row is watermill's forwarder envelope around the event message.
	var env struct {
		DestinationTopic string            `json:"destination_topic"`
		UUID             string            `json:"uuid"`
		Payload          []byte            `json:"payload"`
		Metadata         map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(got[0].Payload), &env); err != nil {
		t.Fatalf("envelope: %v", err)
	}
	if env.DestinationTopic != "proposal.accepted" || env.UUID != kept.ID {
		t.Errorf("envelope topic/uuid = %s/%s, want proposal.accepted/%s", env.DestinationTopic, env.UUID, kept.ID)
	}
	if string(env.Payload) != string(kept.Payload) {
		t.Errorf("payload = %s, want %s", env.Payload, kept.Payload)
	}
	want := map[string]string{
		messaging.HeaderEventID:       kept.ID,
		messaging.HeaderEventType:     "proposal.accepted",
		messaging.HeaderEventSource:   "proposals",
		messaging.HeaderCorrelationID: "req-42",
	}
	for k, v := range want {
		if env.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q", k, env.Metadata[k], v)
		}
	}
	if env.Metadata[messaging.HeaderOccurredAt] == "" {
		t.Error("metadata occurred_at missing")
	}
}

func TestPublishRejectsIncompleteEvents(t *testing.T) {
	db := dbtest.New(t)
	pub, err := outbox.NewPublisher(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bad := newEvent(t, ctx)
	bad.Type = ""
	err = db.WithTx(ctx, func(ctx context.Context) error { return pub.Publish(ctx, bad) })
	if err == nil {
		t.Fatal("an event without a type was accepted")
	}
	if got := rows(t, db); len(got) != 0 {
		t.Fatalf("outbox has %d rows, want 0", len(got))
	}
}

func TestNewPublisherRejectsNil(t *testing.T) {
	if _, err := outbox.NewPublisher(nil, nil); err == nil {
		t.Fatal("NewPublisher(nil) succeeded")
	}
}

// Several events in one Publish, of two types, each become their own row with their own destination.
func TestPublishWritesEveryEventOfABatch(t *testing.T) {
	db := dbtest.New(t)
	pub, err := outbox.NewPublisher(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var events []messaging.Event
	for i, typ := range []string{"delivery.requested", "delivery.requested", "delivery.failed", "delivery.requested"} {
		e, err := messaging.NewEvent(tenancy.With(ctx, tenancy.DefaultID), "webhooks", typ, map[string]int{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	if err := db.WithTx(ctx, func(ctx context.Context) error { return pub.Publish(ctx, events...) }); err != nil {
		t.Fatalf("commit: %v", err)
	}
	got := rows(t, db)
	if len(got) != len(events) {
		t.Fatalf("outbox has %d rows, want %d", len(got), len(events))
	}
	topics := map[string]string{}
	for _, r := range got {
		var env struct {
			DestinationTopic string `json:"destination_topic"`
			UUID             string `json:"uuid"`
		}
		if err := json.Unmarshal([]byte(r.Payload), &env); err != nil {
			t.Fatalf("envelope: %v", err)
		}
		topics[env.UUID] = env.DestinationTopic
	}
	for _, e := range events {
		if topics[e.ID] != e.Type {
			t.Errorf("event %s stored with destination %q, want %q", e.ID, topics[e.ID], e.Type)
		}
	}
}
