package webhooks

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
)

// Redeliver makes a delivery pending again in any status, claims it and requests it, in one unit of
// work. Against a concurrent sweep, consumer or redelivery whichever commits first wins; the loser
// gets a *concurrency.ConflictError (409 concurrency_conflict). A deleted subscription's delivery is
// refused (422): nothing could send it.
func (s *Service) Redeliver(ctx context.Context, id uuid.UUID, pre concurrency.Precondition) (Delivery, error) {
	d, err := database.Update(ctx, s.db, database.Change[Delivery]{
		Load:    func(ctx context.Context) (*Delivery, error) { return s.store.delivery(ctx, id) },
		Version: func(d *Delivery) string { return d.Version.String() },
		If:      pre,
		Apply: func(ctx context.Context, d *Delivery) error {
			if _, err := s.store.subscription(ctx, d.SubscriptionID); errors.Is(err, apperr.ErrNotFound) {
				return apperr.Invalid("id", "the delivery's subscription was deleted")
			} else if err != nil {
				return err
			}
			d.Redeliver(s.now(), s.cfg.ClaimLease, s.instance)
			reqs, err := s.deliveryRequests(ctx, []*Delivery{d})
			if err != nil {
				return err
			}
			return s.events.Publish(ctx, reqs...)
		},
		Save: s.store.saveDelivery,
	})
	return deref(d), err
}
