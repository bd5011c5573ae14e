package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/internal/queries"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

// tenantConsumer requests a tenant's waiting deliveries when it is enabled again (tenancy.EventEnabled).
const tenantConsumer = "webhooks.tenant_enabled"

// tenantRetries bounds how often one batch is loaded again after losing a race with a take or a redelivery.
const tenantRetries = 5

// handleTenantEnabled requests at once what waited while the event's tenant was disabled, instead of
// leaving it to the end of its lease and the next sweep: every pending delivery of the tenant's active
// subscriptions whose claim was issued before the enabling but not taken, or that is due, is claimed
// afresh and requested under the sweep's rules (xmin-checked claim and its request in one unit of work, each claim
// requested once); retries keep their time. Batches go in id order, each in its own unit of work.
func (s *Service) handleTenantEnabled(ctx context.Context, e messaging.Event) error {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return err
	}
	var p tenancy.EnabledPayload
	if err := e.Decode(&p); err != nil {
		return err
	}
	enabled := p.EnabledAt
	if enabled.IsZero() {
		enabled = e.OccurredAt
	}
	// An untaken claim's lease runs from its issue: one ending later was issued after the enabling
	// (a fresh fan-out about to be taken, a request waiting for its rate slot) and is left alone.
	issuedBy := enabled.Add(s.cfg.ClaimLease)
	requested := 0
	for after := uuid.Nil; ; {
		var n int
		var last uuid.UUID
		for try := 1; ; try++ {
			n, last, err = s.requestWaiting(ctx, after, issuedBy)
			if !errors.Is(err, concurrency.ErrConflict) || try == tenantRetries {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("request the waiting deliveries of tenant %s: %w", tenant, err)
		}
		requested += n
		if last == uuid.Nil {
			break
		}
		after = last
	}
	if requested > 0 {
		s.log.InfoContext(ctx, "tenant enabled: waiting deliveries requested", "tenant_id", tenant, "count", requested)
	}
	return nil
}

// requestWaiting claims and requests one batch of the tenant's waiting deliveries after the id after,
// and returns how many it requested and the batch's last id (uuid.Nil when there are no more).
func (s *Service) requestWaiting(ctx context.Context, after uuid.UUID, issuedBy time.Time) (int, uuid.UUID, error) {
	now := s.now()
	var n int
	var last uuid.UUID
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		n, last = 0, uuid.Nil
		waiting, err := s.store.waitingDeliveries(ctx, now, issuedBy, after, s.cfg.SweepBatch)
		if err != nil {
			return fmt.Errorf("load waiting deliveries: %w", err)
		}
		if n, err = s.claimAndRequest(ctx, now, waiting); err != nil {
			return err
		}
		if len(waiting) == s.cfg.SweepBatch {
			last = waiting[len(waiting)-1].ID
		}
		return nil
	})
	return n, last, err
}

// waitingDeliveries are the pending deliveries of the tenant in ctx, of its active subscriptions, that
// the sweep would claim now had its lease ended: claimed but not taken, with a lease ending by
// leaseEndBy (requested while the tenant was disabled), or due. A taken claim whose lease runs is left
// alone (its send may be in flight), as is a retry not yet due. Nothing when the tenant is disabled again.
func (s store) waitingDeliveries(ctx context.Context, now, leaseEndBy time.Time, after uuid.UUID, limit int) ([]*Delivery, error) {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return nil, err
	}
	var ds []*Delivery
	q := queries.WaitingDeliveries{Tenant: tenant, Pending: string(StatusPending), Active: string(StatusActive), After: after,
		Now: now, LeaseEndBy: leaseEndBy, Limit: limit}
	err = s.conn(ctx).Raw(q.SQL(), q.Args()...).Scan(&ds).Error
	return ds, err
}
