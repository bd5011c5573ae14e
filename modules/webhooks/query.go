package webhooks

import (
	"context"

	"github.com/google/uuid"
)

// Delivery returns one delivery with its attempts, oldest first.
func (s *Service) Delivery(ctx context.Context, id uuid.UUID) (Delivery, []Attempt, error) {
	d, err := s.store.delivery(ctx, id)
	if err != nil {
		return Delivery{}, nil, err
	}
	attempts, err := s.store.attempts(ctx, id)
	if err != nil {
		return Delivery{}, nil, err
	}
	return *d, attempts, nil
}

// Deliveries lists deliveries newest first, older than the delivery id before (uuid.Nil = from the newest).
func (s *Service) Deliveries(ctx context.Context, f DeliveryFilter, before uuid.UUID, limit int) ([]Delivery, error) {
	return s.store.deliveries(ctx, f, before, limit)
}
