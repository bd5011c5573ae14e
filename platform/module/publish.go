package module

import (
	"context"
	"fmt"

	"github.com/keelson/keelson/platform/messaging"
)

// Publish writes one integration event of source (the module's name) into the outbox of the unit of
// work in ctx; the event carries the tenant and correlation id of ctx.
func Publish(ctx context.Context, events EventPublisher, source, eventType string, payload any) error {
	e, err := messaging.NewEvent(ctx, source, eventType, payload)
	if err != nil {
		return err
	}
	if err := events.Publish(ctx, e); err != nil {
		return fmt.Errorf("publish %s: %w", eventType, err)
	}
	return nil
}
