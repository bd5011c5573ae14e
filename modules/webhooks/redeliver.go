package webhooks

import (
	"context"

	"github.com/google/uuid"
)

// Redeliver makes a delivery pending again in any status, claims it and requests it, in one unit of
// work. Against a concurrent sweep, consumer or redelivery whichever commits first wins; the loser
// gets a *concurrency.ConflictError (409 concurrency_conflict).
func (s *Service) Redeliver(ctx context.Context, id uuid.UUID, check VersionCheck) (Delivery, error) {
	var out Delivery
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		d, err := s.store.delivery(ctx, id)
		if err != nil {
			return err
		}
		if err := check.run(d.Version.String()); err != nil {
			return err
		}
		claim := d.Redeliver(s.now(), s.cfg.ClaimLease)
		if err := s.store.saveDelivery(ctx, d); err != nil {
			return err
		}
		req, err := s.deliveryRequested(ctx, d.ID, claim)
		if err != nil {
			return err
		}
		if err := s.events.Publish(ctx, req); err != nil {
			return err
		}
		out = *d
		return nil
	})
	return out, err
}
