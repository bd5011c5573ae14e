package webhooks

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/httpapi"
)

// mountRoutes mounts the API.md webhooks routes on /api/v1/webhooks.
func mountRoutes(g *gin.RouterGroup, s *Service) {
	h := handlers{s: s}
	g.POST("/subscriptions", httpapi.H(h.createSubscription))
	g.GET("/subscriptions", httpapi.H(h.listSubscriptions))
	g.GET("/subscriptions/:id", httpapi.H(h.getSubscription))
	g.PATCH("/subscriptions/:id", httpapi.H(h.updateSubscription))
	g.DELETE("/subscriptions/:id", httpapi.H(h.deleteSubscription))
	g.POST("/subscriptions/:id/rotate-secret", httpapi.H(h.rotateSecret))
	g.POST("/subscriptions/:id/pause", httpapi.H(h.pauseSubscription))
	g.POST("/subscriptions/:id/resume", httpapi.H(h.resumeSubscription))
	g.GET("/subscriptions/:id/stats", httpapi.H(h.subscriptionStats))
	g.POST("/subscriptions/:id/test", httpapi.H(h.sendTest))
	g.POST("/events", httpapi.H(h.publishEvent))
	g.GET("/event-types", httpapi.H(h.listEventTypes))
	g.GET("/deliveries", httpapi.H(h.listDeliveries))
	g.GET("/deliveries/:id", httpapi.H(h.getDelivery))
	g.POST("/deliveries/:id/redeliver", httpapi.H(h.redeliver))
}

type handlers struct{ s *Service }

// --- subscriptions

type createSubscriptionRequest struct {
	URL         string            `json:"url"`
	EventTypes  []string          `json:"event_types"`
	Description string            `json:"description"`
	Secret      string            `json:"secret"`
	Enabled     *bool             `json:"enabled"`
	Status      string            `json:"status"`
	Headers     map[string]string `json:"headers"`
}

type updateSubscriptionRequest struct {
	URL         *string            `json:"url"`
	EventTypes  *[]string          `json:"event_types"`
	Description *string            `json:"description"`
	Enabled     *bool              `json:"enabled"`
	Status      *string            `json:"status"`
	Headers     *map[string]string `json:"headers"`
}

type subscriptionResponse struct {
	ID          uuid.UUID          `json:"id"`
	URL         string             `json:"url"`
	EventTypes  []string           `json:"event_types"`
	Description string             `json:"description"`
	Enabled     bool               `json:"enabled"`
	Status      SubscriptionStatus `json:"status"`
	// DisabledReason is manual, failing or gone while disabled, else null.
	DisabledReason      *string    `json:"disabled_reason"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	// Headers names the custom headers sent with every attempt; their values are never shown.
	Headers   map[string]string `json:"headers"`
	Secret    string            `json:"secret,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	Version   string            `json:"version"`
	Warnings  []string          `json:"warnings,omitempty"` // patterns matching no catalogued type, on create and update
}

// toSubscriptionResponse never includes the secret; create and rotate add it explicitly.
func toSubscriptionResponse(s Subscription) subscriptionResponse {
	types := []string(s.EventTypes)
	if types == nil {
		types = []string{}
	}
	return subscriptionResponse{
		ID: s.ID, URL: s.URL, EventTypes: types, Description: s.Description, Enabled: s.Enabled,
		Status: s.Status, DisabledReason: nullable(s.DisabledReason),
		LastSuccessAt: utc(s.Health.LastSuccessAt), LastFailureAt: utc(s.Health.LastFailureAt),
		ConsecutiveFailures: s.Health.ConsecutiveFailures, Headers: s.Headers.redacted(),
		CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC(), Version: s.Version.String(),
	}
}

func (h handlers) createSubscription(c *gin.Context) error {
	var req createSubscriptionRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		return err
	}
	sub, secret, err := h.s.CreateSubscription(c.Request.Context(), SubscriptionInput(req))
	if err != nil {
		return err
	}
	resp := toSubscriptionResponse(sub)
	resp.Secret = secret
	resp.Warnings = h.s.patternWarnings(sub.EventTypes)
	c.Header("Location", c.Request.URL.Path+"/"+sub.ID.String())
	httpapi.SetETag(c, resp.Version)
	c.JSON(http.StatusCreated, resp)
	return nil
}

type subscriptionCursor struct {
	After uuid.UUID `json:"after"`
}

func (h handlers) listSubscriptions(c *gin.Context) error {
	page, err := httpapi.ParsePage(c)
	if err != nil {
		return err
	}
	subs, next, err := httpapi.Paginate(page, func(cur subscriptionCursor, limit int) ([]Subscription, error) {
		return h.s.Subscriptions(c.Request.Context(), cur.After, limit)
	}, func(last Subscription) subscriptionCursor { return subscriptionCursor{After: last.ID} })
	if err != nil {
		return err
	}
	items := make([]subscriptionResponse, len(subs))
	for i, s := range subs {
		items[i] = toSubscriptionResponse(s)
	}
	c.JSON(http.StatusOK, httpapi.NewList(items, next))
	return nil
}

func (h handlers) getSubscription(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	sub, err := h.s.Subscription(c.Request.Context(), id)
	if err != nil {
		return err
	}
	if httpapi.NotModified(c, sub.Version.String()) {
		return nil
	}
	resp := toSubscriptionResponse(sub)
	httpapi.SetETag(c, resp.Version)
	c.JSON(http.StatusOK, resp)
	return nil
}

func (h handlers) updateSubscription(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	var req updateSubscriptionRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		return err
	}
	sub, err := h.s.UpdateSubscription(c.Request.Context(), id, SubscriptionPatch(req), httpapi.Precondition(c))
	if err != nil {
		return err
	}
	resp := toSubscriptionResponse(sub)
	if req.EventTypes != nil {
		resp.Warnings = h.s.patternWarnings(sub.EventTypes)
	}
	httpapi.SetETag(c, resp.Version)
	c.JSON(http.StatusOK, resp)
	return nil
}

func (h handlers) deleteSubscription(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	if err := h.s.DeleteSubscription(c.Request.Context(), id, httpapi.Precondition(c)); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

func (h handlers) rotateSecret(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	if err := httpapi.BindJSON(c, &struct{}{}, httpapi.AllowEmpty); err != nil {
		return err
	}
	sub, secret, err := h.s.RotateSecret(c.Request.Context(), id, httpapi.Precondition(c))
	if err != nil {
		return err
	}
	resp := toSubscriptionResponse(sub)
	resp.Secret = secret
	httpapi.SetETag(c, resp.Version)
	c.JSON(http.StatusOK, resp)
	return nil
}

// --- events

type publishEventRequest struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type publishEventResponse struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Deliveries int    `json:"deliveries"`
	Duplicate  bool   `json:"duplicate,omitempty"`
}

func (h handlers) publishEvent(c *gin.Context) error {
	var req publishEventRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		return err
	}
	res, err := h.s.PublishEvent(c.Request.Context(), EventInput{ID: req.ID, Type: req.Type, Data: req.Data})
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if res.Duplicate {
		status = http.StatusOK // the event was already accepted: nothing new happened
	}
	c.JSON(status, publishEventResponse{ID: res.ID, Type: res.Type, Deliveries: res.Deliveries, Duplicate: res.Duplicate})
	return nil
}

// --- deliveries

type deliveryResponse struct {
	ID             uuid.UUID          `json:"id"`
	SubscriptionID uuid.UUID          `json:"subscription_id"`
	EventID        string             `json:"event_id"`
	EventType      string             `json:"event_type"`
	Status         DeliveryStatus     `json:"status"`
	AttemptCount   int                `json:"attempt_count"`
	NextAttemptAt  *time.Time         `json:"next_attempt_at"`
	LastStatusCode *int               `json:"last_status_code"`
	LastError      *string            `json:"last_error"`
	ClaimedBy      *string            `json:"claimed_by"`
	CreatedAt      time.Time          `json:"created_at"`
	UpdatedAt      time.Time          `json:"updated_at"`
	Version        string             `json:"version"`
	Attempts       *[]attemptResponse `json:"attempts,omitempty"`
	Payload        json.RawMessage    `json:"payload,omitempty"` // detail only: the body every attempt sends
}

type attemptResponse struct {
	Number          int               `json:"number"`
	Trigger         Trigger           `json:"trigger"`
	StartedAt       time.Time         `json:"started_at"`
	DurationMS      int               `json:"duration_ms"`
	StatusCode      *int              `json:"status_code"`
	Error           *string           `json:"error"`
	ErrorClass      *string           `json:"error_class"`
	ResponseExcerpt string            `json:"response_excerpt"`
	Result          AttemptResult     `json:"result"`
	ResponseHeaders map[string]string `json:"response_headers"`
	Instance        string            `json:"instance"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toDeliveryResponse(d Delivery) deliveryResponse {
	var next *time.Time
	if d.NextAttemptAt != nil && d.Status == StatusPending {
		t := d.NextAttemptAt.UTC()
		next = &t
	}
	return deliveryResponse{
		ID: d.ID, SubscriptionID: d.SubscriptionID, EventID: d.EventID, EventType: d.EventType,
		Status: d.Status, AttemptCount: d.AttemptCount, NextAttemptAt: next,
		LastStatusCode: d.LastStatusCode, LastError: nullable(d.LastError), ClaimedBy: nullable(d.ClaimedBy),
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(), Version: d.Version.String(),
	}
}

func toAttemptResponses(as []Attempt) *[]attemptResponse {
	out := make([]attemptResponse, len(as))
	for i, a := range as {
		out[i] = attemptResponse{
			Number: a.Number, Trigger: a.Trigger, StartedAt: a.StartedAt.UTC(), DurationMS: a.DurationMS,
			StatusCode: a.StatusCode, Error: nullable(a.Error), ErrorClass: nullable(a.ErrorClass),
			ResponseExcerpt: a.ResponseExcerpt, Result: a.Result, ResponseHeaders: a.ResponseHeaders, Instance: a.Instance,
		}
		if out[i].ResponseHeaders == nil {
			out[i].ResponseHeaders = map[string]string{}
		}
	}
	return &out
}

type deliveryCursor struct {
	Before uuid.UUID `json:"before"`
}

func (h handlers) listDeliveries(c *gin.Context) error {
	page, err := httpapi.ParsePage(c)
	if err != nil {
		return err
	}
	f, err := deliveryFilter(c)
	if err != nil {
		return err
	}
	ds, next, err := httpapi.Paginate(page, func(cur deliveryCursor, limit int) ([]Delivery, error) {
		return h.s.Deliveries(c.Request.Context(), f, cur.Before, limit)
	}, func(last Delivery) deliveryCursor { return deliveryCursor{Before: last.ID} })
	if err != nil {
		return err
	}
	items := make([]deliveryResponse, len(ds))
	for i, d := range ds {
		items[i] = toDeliveryResponse(d)
	}
	c.JSON(http.StatusOK, httpapi.NewList(items, next))
	return nil
}

// deliveryFilter reads ?status, ?subscription_id and ?event_type; a bad value is 400 invalid_query.
func deliveryFilter(c *gin.Context) (DeliveryFilter, error) {
	var f DeliveryFilter
	if v, ok := c.GetQuery("status"); ok && v != "" {
		switch s := DeliveryStatus(v); s {
		case StatusPending, StatusSucceeded, StatusFailed:
			f.Status = s
		default:
			return f, httpapi.InvalidQuery("status", "must be pending, succeeded or failed")
		}
	}
	var err error
	if f.SubscriptionID, err = httpapi.QueryUUID(c, "subscription_id"); err != nil {
		return f, err
	}
	if v, ok := c.GetQuery("event_type"); ok && v != "" {
		if err := validateEventType(v); err != nil {
			return f, httpapi.InvalidQuery("event_type", err.Error())
		}
		f.EventType = v
	}
	return f, nil
}

func (h handlers) getDelivery(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	d, attempts, err := h.s.Delivery(c.Request.Context(), id)
	if err != nil {
		return err
	}
	if httpapi.NotModified(c, d.Version.String()) {
		return nil
	}
	payload, err := h.s.EventPayload(c.Request.Context(), d.EventID)
	if err != nil {
		return err
	}
	resp := toDeliveryResponse(d)
	resp.Attempts = toAttemptResponses(attempts)
	resp.Payload = payload
	httpapi.SetETag(c, resp.Version)
	c.JSON(http.StatusOK, resp)
	return nil
}

func (h handlers) redeliver(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	if err := httpapi.BindJSON(c, &struct{}{}, httpapi.AllowEmpty); err != nil {
		return err
	}
	d, err := h.s.Redeliver(c.Request.Context(), id, httpapi.Precondition(c))
	if err != nil {
		return err
	}
	resp := toDeliveryResponse(d)
	httpapi.SetETag(c, resp.Version)
	c.JSON(http.StatusAccepted, resp)
	return nil
}
