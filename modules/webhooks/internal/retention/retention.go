// Package retention prunes what the delivery engine no longer needs: finished deliveries with their
// attempts, then events no delivery refers to. It runs as a schedule on one replica at a time and
// never touches a pending delivery, so it can run beside live traffic; it is apart from the engine
// because nothing on the delivery path depends on it.
package retention

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/tenancy"
)

var (
	//go:embed prune_deliveries.sql
	pruneDeliveries string
	//go:embed prune_events.sql
	pruneEvents string
)

// Pruned counts what one prune removed.
type Pruned struct {
	Deliveries int64 // finished deliveries (each with its attempts)
	Attempts   int64
	Events     int64
}

// PruneBefore deletes, in batches of batch rows, finished (succeeded or failed) deliveries last changed
// before cutoff with their attempts, then events from before cutoff with no delivery left.
// Pending deliveries — waiting for a retry, claimed, or taken by a sender — are never touched: the
// statement selects only finished rows and locks them with SKIP LOCKED, and PostgreSQL re-checks the
// status of a row another transaction changed meanwhile (a redelivery or recovery making it pending
// again), so such a row is skipped.
//
// Deliveries are found on their primary key: a delivery's time-ordered (v7) id is minted at its
// creation, which precedes its last change, so every row changed before cutoff has an id below the
// bound of cutoff's millisecond. The range is walked in id order from batch to batch (after), which
// spares the table an index on its last change that every outcome would write an entry to.
func PruneBefore(ctx context.Context, db *database.DB, cutoff time.Time, batch int) (Pruned, error) {
	ctx = tenancy.System(ctx, "webhooks retention") // every tenant's old rows go
	var p Pruned
	after, bound := uuid.Nil, v7After(cutoff)
	for {
		var deleted struct {
			Deliveries, Attempts int64
			Last                 *uuid.UUID
		}
		err := db.Conn(ctx).Raw(pruneDeliveries,
			sql.Named("after", after), sql.Named("bound", bound), sql.Named("cutoff", cutoff), sql.Named("batch", batch)).
			Scan(&deleted).Error
		if err != nil {
			return p, fmt.Errorf("prune deliveries: %w", err)
		}
		p.Deliveries += deleted.Deliveries
		p.Attempts += deleted.Attempts
		if deleted.Deliveries < int64(batch) || deleted.Last == nil {
			break
		}
		after = *deleted.Last
	}
	for {
		res := db.Conn(ctx).Exec(pruneEvents, sql.Named("cutoff", cutoff), sql.Named("batch", batch))
		if res.Error != nil {
			return p, fmt.Errorf("prune events: %w", res.Error)
		}
		p.Events += res.RowsAffected
		if res.RowsAffected < int64(batch) {
			return p, nil
		}
	}
}

// v7After is the least id a v7 UUID minted after t's millisecond can have: every v7 id of t or
// earlier is below it (PostgreSQL orders uuids byte by byte, and a v7 id begins with its Unix milliseconds).
func v7After(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(t.UnixMilli()) + 1
	for i := 5; i >= 0; i-- {
		id[i] = byte(ms)
		ms >>= 8
	}
	return id
}
