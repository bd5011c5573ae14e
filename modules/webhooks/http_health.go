package webhooks

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/httpapi"
)

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (h handlers) pauseSubscription(ctx context.Context, in *emptyBodyIn) (*subscriptionOut, error) {
	return changeStatus(ctx, in, h.s.PauseSubscription)
}

func (h handlers) resumeSubscription(ctx context.Context, in *emptyBodyIn) (*subscriptionOut, error) {
	return changeStatus(ctx, in, h.s.ResumeSubscription)
}

// changeStatus runs PauseSubscription or ResumeSubscription and answers the subscription.
func changeStatus(ctx context.Context, in *emptyBodyIn,
	change func(context.Context, uuid.UUID, concurrency.Precondition) (Subscription, error)) (*subscriptionOut, error) {
	sub, err := change(ctx, in.ID, in.If)
	if err != nil {
		return nil, err
	}
	return subscriptionAnswer(toSubscriptionResponse(sub)), nil
}

type statsOut struct {
	Body SubscriptionStats
}

func (h handlers) subscriptionStats(ctx context.Context, in *httpapi.ByID) (*statsOut, error) {
	st, err := h.s.SubscriptionStats(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return &statsOut{Body: st}, nil
}

// sendTestIn takes an empty body or {}: the test event's content is fixed.
type sendTestIn struct {
	ID   uuid.UUID `path:"id"`
	Body struct{}  `required:"false"`
}

type createdDeliveryOut struct {
	ETag     string `header:"ETag"`
	Location string `header:"Location"`
	Body     deliveryResponse
}

func (h handlers) sendTest(ctx context.Context, in *sendTestIn) (*createdDeliveryOut, error) {
	d, err := h.s.SendTest(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	resp := toDeliveryResponse(d)
	return &createdDeliveryOut{ETag: resp.Version, Location: httpapi.APIPrefix + "/webhooks/deliveries/" + d.ID.String(), Body: resp}, nil
}
