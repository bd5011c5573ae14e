package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/tenancy"
)

// sweepShare is how many due deliveries of one failing subscription a sweep claims at most: a tenth
// of the batch, so a backlog on one failing endpoint leaves room for nine others' in every sweep.
func sweepShare(batch int) int { return max(1, batch/10) }

// Sweep claims due deliveries (retries whose time has come, and claims whose lease expired because a
// message or a process was lost) and requests each of them, all in one unit of work. If a redelivery
// changed one of the rows meanwhile, the whole batch rolls back — claims and outbox rows — and the
// next sweep takes the rest: no retry loop.
func (s *Service) Sweep(ctx context.Context) error {
	ctx = tenancy.System(ctx, "webhooks sweep") // every tenant's due deliveries; each request carries its own
	now := s.now()
	if due, err := s.store.countDue(ctx, now); err == nil {
		s.metrics.backlog.Set(float64(due))
	}
	claimed := 0
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		due, err := s.store.dueDeliveries(ctx, now, s.cfg.SweepBatch, sweepShare(s.cfg.SweepBatch))
		if err != nil {
			return fmt.Errorf("load due deliveries: %w", err)
		}
		if claimed, err = s.claimAndRequest(ctx, now, due); err != nil {
			return err
		}
		// After the deliveries' locks, as an outcome takes them: health rows come second.
		return s.store.holdProbes(ctx, subscriptionsOf(due), now, now.Add(s.cfg.ClaimLease))
	})
	if errors.Is(err, concurrency.ErrConflict) {
		s.log.Info("sweep lost a race with a redelivery; batch rolled back, the next sweep takes the rest", "error", err)
		return nil
	}
	if err != nil {
		return err
	}
	if claimed > 0 {
		s.log.Debug("sweep claimed due deliveries", "count", claimed)
	}
	return nil
}

// claimAndRequest claims each delivery for this replica and publishes its request, in the caller's
// unit of work, and returns how many it requested.
func (s *Service) claimAndRequest(ctx context.Context, now time.Time, deliveries []*Delivery) (int, error) {
	for _, d := range deliveries {
		d.Claim(now, s.cfg.ClaimLease, s.instance)
		if err := s.store.saveDelivery(ctx, d); err != nil {
			return 0, err
		}
	}
	requests, err := s.deliveryRequests(ctx, deliveries)
	if err != nil {
		return 0, err
	}
	if len(requests) > 0 {
		if err := s.events.Publish(ctx, requests...); err != nil {
			return 0, fmt.Errorf("publish delivery requests: %w", err)
		}
	}
	return len(deliveries), nil
}

// subscriptionsOf lists the subscriptions of deliveries, each once.
func subscriptionsOf(ds []*Delivery) []uuid.UUID {
	seen := make(map[uuid.UUID]bool, len(ds))
	var out []uuid.UUID
	for _, d := range ds {
		if !seen[d.SubscriptionID] {
			seen[d.SubscriptionID] = true
			out = append(out, d.SubscriptionID)
		}
	}
	return out
}
