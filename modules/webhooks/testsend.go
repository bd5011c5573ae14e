package webhooks

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/tenancy"
)

// SendTest sends a webhook.test event to one live subscription alone, whatever its patterns: one
// event, one claimed delivery, its request, in one unit of work. A paused or disabled subscription's
// test delivery waits like its others.
func (s *Service) SendTest(ctx context.Context, id uuid.UUID) (Delivery, error) {
	var out Delivery
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		sub, err := s.store.subscription(ctx, id)
		if err != nil {
			return err
		}
		eventID, err := uuid.NewV7()
		if err != nil {
			return err
		}
		data, err := json.Marshal(contract.TestEventPayload{SubscriptionID: id, Message: contract.TestEventMessage})
		if err != nil {
			return err
		}
		now := s.now()
		ev := &eventRecord{ID: eventID.String(), Owned: tenancy.Owned{TenantID: sub.TenantID}, Type: contract.TestEvent, Data: data, CreatedAt: now}
		if _, err := s.store.insertEvents(ctx, []*eventRecord{ev}); err != nil {
			return fmt.Errorf("store test event: %w", err)
		}
		d, _, err := newDelivery(sub.ID, ev.ID, ev.Type, now, s.cfg.ClaimLease, s.instance)
		if err != nil {
			return err
		}
		if err := s.store.createDeliveries(ctx, []*Delivery{d}); err != nil {
			return err
		}
		reqs, err := s.deliveryRequests(ctx, []*Delivery{d})
		if err != nil {
			return err
		}
		if err := s.events.Publish(ctx, reqs...); err != nil {
			return err
		}
		// Read back for its version (the answer's ETag): createDeliveries returns nothing of the rows.
		stored, err := s.store.delivery(ctx, d.ID)
		if err != nil {
			return err
		}
		out = *stored
		return nil
	})
	return out, err
}
