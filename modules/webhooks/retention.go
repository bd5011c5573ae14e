package webhooks

import (
	"context"
	"time"

	"github.com/keelson/keelson/modules/webhooks/internal/retention"
)

// retentionSchedule prunes old events, finished deliveries and their attempts, on one replica at a time.
const retentionSchedule = "webhooks.retention"

// DefaultRetention is how long events, finished deliveries and attempts are kept.
const DefaultRetention = 30 * 24 * time.Hour

const (
	defaultRetentionBatch = 5000
	// pruneRunBound caps one run: a large backlog is pruned over several runs, never in one long job.
	pruneRunBound = 2 * time.Minute
)

func (c Config) retentionInterval() time.Duration { return 10 * time.Minute }

func (c Config) retentionBatch() int {
	if c.RetentionBatch > 0 {
		return c.RetentionBatch
	}
	return defaultRetentionBatch
}

// Pruned counts what one Prune removed.
type Pruned = retention.Pruned

// Prune deletes, in batches of RetentionBatch, finished (succeeded or failed) deliveries last changed
// before now − Retention with their attempts, then events older than that with no delivery left.
// Pending deliveries — waiting for a retry, claimed, or taken by a sender — are never touched: the
// statement selects only finished rows and locks them with SKIP LOCKED, and PostgreSQL re-checks the
// status of a row another transaction changed meanwhile (a redelivery or recovery making it pending
// again), so such a row is skipped. Retention 0 keeps everything.
func (s *Service) Prune(ctx context.Context) error {
	if s.cfg.Retention <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pruneRunBound)
	defer cancel()
	p, err := s.PruneBefore(ctx, s.now().Add(-s.cfg.Retention), s.cfg.retentionBatch())
	if p.Deliveries+p.Events > 0 {
		s.log.Info("webhooks retention pruned", "deliveries", p.Deliveries, "attempts", p.Attempts, "events", p.Events)
	}
	if ctx.Err() != nil && err != nil {
		return nil // the run's bound: the next run goes on
	}
	return err
}

// PruneBefore deletes finished deliveries, their attempts and delivery-less events from before cutoff
// (retention.PruneBefore).
func (s *Service) PruneBefore(ctx context.Context, cutoff time.Time, batch int) (Pruned, error) {
	return retention.PruneBefore(ctx, s.db, cutoff, batch)
}
