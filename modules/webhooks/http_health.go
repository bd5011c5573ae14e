package webhooks

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
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

func (h handlers) pauseSubscription(c *gin.Context) error {
	return h.changeStatus(c, h.s.PauseSubscription)
}

func (h handlers) resumeSubscription(c *gin.Context) error {
	return h.changeStatus(c, h.s.ResumeSubscription)
}

func (h handlers) changeStatus(c *gin.Context, change statusChange) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	if err := httpapi.BindJSON(c, &struct{}{}, httpapi.AllowEmpty); err != nil {
		return err
	}
	sub, err := change(c.Request.Context(), id, httpapi.Precondition(c))
	if err != nil {
		return err
	}
	resp := toSubscriptionResponse(sub)
	httpapi.SetETag(c, resp.Version)
	c.JSON(http.StatusOK, resp)
	return nil
}

// statusChange is PauseSubscription or ResumeSubscription.
type statusChange func(ctx context.Context, id uuid.UUID, pre concurrency.Precondition) (Subscription, error)

func (h handlers) subscriptionStats(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	st, err := h.s.SubscriptionStats(c.Request.Context(), id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, st)
	return nil
}

func (h handlers) sendTest(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	if err := httpapi.BindJSON(c, &struct{}{}, httpapi.AllowEmpty); err != nil {
		return err
	}
	d, err := h.s.SendTest(c.Request.Context(), id)
	if err != nil {
		return err
	}
	resp := toDeliveryResponse(d)
	c.Header("Location", "/api/v1/webhooks/deliveries/"+d.ID.String())
	httpapi.SetETag(c, resp.Version)
	c.JSON(http.StatusAccepted, resp)
	return nil
}
