package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/internal/eventtype"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/httpapi"
)

// mountRoutes declares the webhooks routes on /api/v1/webhooks.
func mountRoutes(api *httpapi.API, s *Service) {
	h := handlers{s: s}
	g := api.Module("/webhooks", "webhooks").Scopes(auth.WebhooksRead, auth.WebhooksWrite)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/subscriptions", ID: "createWebhookSubscription",
		Summary: "Create a subscription; the answer carries its signing secret. Beyond the tenant's quota of live subscriptions: 409 subscription_quota_exceeded.",
		Status:  http.StatusCreated, Errors: []int{http.StatusConflict}}, h.createSubscription)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/subscriptions", ID: "listWebhookSubscriptions",
		Summary: "List live subscriptions, oldest first."}, h.listSubscriptions)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/subscriptions/{id}", ID: "getWebhookSubscription",
		Summary: "Get a subscription (no secret)."}, h.getSubscription)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPatch, Path: "/subscriptions/{id}", ID: "updateWebhookSubscription",
		Summary: "Change a subscription's url, event types, description or enabled flag."}, h.updateSubscription)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodDelete, Path: "/subscriptions/{id}", ID: "deleteWebhookSubscription",
		Summary: "Delete a subscription; its pending deliveries are given up.", Status: http.StatusNoContent}, h.deleteSubscription)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/subscriptions/{id}/rotate-secret", ID: "rotateWebhookSecret",
		Summary: "Replace the signing secret; the old one keeps signing beside it for 24 hours or expire_previous_in, and earlier ones until their own expiry."}, h.rotateSecret)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/subscriptions/{id}/pause", ID: "pauseWebhookSubscription",
		Summary: "Pause sending: pending deliveries wait, new events still add deliveries."}, h.pauseSubscription)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/subscriptions/{id}/resume", ID: "resumeWebhookSubscription",
		Summary: "Make a paused or disabled subscription active; its waiting deliveries are sent from where they were."}, h.resumeSubscription)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/subscriptions/{id}/stats", ID: "getWebhookSubscriptionStats",
		Summary: "Attempts, success rate, p50/p95 duration over the last hour and day, and the due backlog."}, h.subscriptionStats)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/subscriptions/{id}/test", ID: "sendWebhookTest",
		Summary: "Send a webhook.test event to this subscription alone; answers with its delivery.", Status: http.StatusAccepted}, h.sendTest)

	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/events", ID: "publishWebhookEvent",
		Summary: "Publish an event of the client's own type to every matching subscription. Idempotent on id: the same id, type and data again answers 200 duplicate, another type or data 409 event_id_reused. Data beyond the payload size limit (256 KiB by default): 413 payload_too_large.",
		Status:  http.StatusAccepted, OtherStatuses: []int{http.StatusOK}, Errors: []int{http.StatusConflict}}, h.publishEvent)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/event-types", ID: "listWebhookEventTypes",
		Summary: "List the public event types modules publish, with their payload schema and an example."}, h.listEventTypes)

	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/deliveries", ID: "listWebhookDeliveries",
		Summary: "List deliveries, newest first."}, h.listDeliveries)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/deliveries/{id}", ID: "getWebhookDelivery",
		Summary: "Get a delivery with its attempts and the body they send."}, h.getDelivery)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/deliveries/{id}/redeliver", ID: "redeliverWebhook",
		Summary: "Send a delivery again, whatever its status.", Status: http.StatusAccepted}, h.redeliver)

	mountLifecycleRoutes(g, h)
	mountOverviewRoutes(g, h)
}

type handlers struct{ s *Service }

// writeByID names one resource, with If-Match.
type writeByID struct {
	ID uuid.UUID `path:"id"`
	If concurrency.Precondition
}

// subscriptionOut is a subscription with its version as ETag.
type subscriptionOut = httpapi.Versioned[subscriptionResponse]

func subscriptionAnswer(resp subscriptionResponse) *subscriptionOut {
	return &subscriptionOut{ETag: resp.Version, Body: resp}
}

// --- subscriptions

type createSubscriptionRequest struct {
	URL                  string            `json:"url"`
	EventTypes           []string          `json:"event_types" nullable:"false" minItems:"1" maxItems:"50" doc:"1–50 patterns: an exact type, \"prefix.*\" or \"*\""`
	Description          string            `json:"description,omitempty"`
	Secret               string            `json:"secret,omitempty" doc:"generated when absent"`
	Enabled              *bool             `json:"enabled,omitempty" doc:"default true"`
	Status               string            `json:"status,omitempty"`
	Headers              map[string]string `json:"headers,omitempty"`
	RateLimit            *float64          `json:"rate_limit,omitempty" doc:"requests per second, 0.1–10000; 0 or absent = no limit"`
	Filter               string            `json:"filter,omitempty" doc:"a CEL expression (cel.dev) over the event, evaluated when it fans out: only events it accepts become deliveries to this subscription, after event_types matched. It sees id and type (strings), timestamp, and data (the event's data; JSON numbers are doubles and compare with ints as numbers) and must produce a bool, such as data.amount > 100 && data.currency == \"EUR\". An event it fails on (a missing field: guard with has(data.x); a type mismatch; its cost limit) is not delivered. Refused with 422 naming the line and column of the error. Absent or \"\" = every matching event."`
	Transform            string            `json:"transform,omitempty" doc:"a CEL expression over the event (the variables of filter) producing the JSON object sent as the request body instead of the event's {id, type, timestamp, data}, such as {\"kind\": type, \"total\": data.amount, \"customer\": data.customer.id}: rename, drop or reshape fields. Evaluated at each attempt within a cost limit and signed like any body; an attempt it fails on (a missing field) fails with the reason. Refused with 422 naming the line and column of the error, or when it cannot produce an object. Absent or \"\" = the event's body."`
	ProxyURL             string            `json:"proxy_url,omitempty" doc:"this endpoint's HTTP CONNECT proxy, http://host:port (no user information), instead of the deployment's WEBHOOKS_EGRESS_PROXY; the SSRF guard still judges the endpoint's address, and the proxy's like a target's"`
	TLSClientCertificate string            `json:"tls_client_certificate,omitempty" doc:"PEM client certificate (and chain) presented to an https endpoint that asks for one (mTLS); needs tls_client_key"`
	TLSClientKey         string            `json:"tls_client_key,omitempty" doc:"PEM private key of tls_client_certificate; stored sealed like the signing secret and never returned"`
	TLSCABundle          string            `json:"tls_ca_bundle,omitempty" doc:"PEM certificates the endpoint's server certificate is verified against instead of the system roots"`
}

type updateSubscriptionRequest struct {
	URL                  *string            `json:"url,omitempty"`
	EventTypes           *[]string          `json:"event_types,omitempty" minItems:"1" maxItems:"50"`
	Description          *string            `json:"description,omitempty"`
	Enabled              *bool              `json:"enabled,omitempty"`
	Status               *string            `json:"status,omitempty"`
	Headers              *map[string]string `json:"headers,omitempty"`
	RateLimit            *float64           `json:"rate_limit,omitempty" doc:"requests per second; 0 removes the limit"`
	Filter               *string            `json:"filter,omitempty" doc:"a CEL expression over the event (see create); \"\" removes the filter"`
	Transform            *string            `json:"transform,omitempty" doc:"a CEL expression producing the body sent (see create); \"\" sends the event's body again"`
	ProxyURL             *string            `json:"proxy_url,omitempty" doc:"\"\" removes the endpoint's own proxy"`
	TLSClientCertificate *string            `json:"tls_client_certificate,omitempty" doc:"replaces the client certificate; comes with tls_client_key, and \"\" in both removes them"`
	TLSClientKey         *string            `json:"tls_client_key,omitempty" doc:"the new certificate's PEM private key; never returned"`
	TLSCABundle          *string            `json:"tls_ca_bundle,omitempty" doc:"\"\" goes back to the system roots"`
}

func (r createSubscriptionRequest) input() SubscriptionInput {
	return SubscriptionInput{URL: r.URL, EventTypes: r.EventTypes, Description: r.Description, Secret: r.Secret, Enabled: r.Enabled,
		Status: r.Status, Headers: r.Headers, RateLimit: r.RateLimit, Filter: r.Filter, Transform: r.Transform,
		Egress: EgressInput{ProxyURL: r.ProxyURL, TLSClientCertificate: r.TLSClientCertificate, TLSClientKey: r.TLSClientKey, TLSCABundle: r.TLSCABundle}}
}

func (r updateSubscriptionRequest) patch() SubscriptionPatch {
	return SubscriptionPatch{URL: r.URL, EventTypes: r.EventTypes, Description: r.Description, Enabled: r.Enabled, Status: r.Status,
		Headers: r.Headers, RateLimit: r.RateLimit, Filter: r.Filter, Transform: r.Transform,
		Egress: EgressPatch{ProxyURL: r.ProxyURL, TLSClientCertificate: r.TLSClientCertificate, TLSClientKey: r.TLSClientKey, TLSCABundle: r.TLSCABundle}}
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
	Secret    string            `json:"secret,omitempty" secret:"true" doc:"shown by create and rotate only; a replay under the same Idempotency-Key leaves it out (Idempotent-Redacted: secret)"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	Version   string            `json:"version"`
	Warnings  []string          `json:"warnings,omitempty"` // patterns matching no catalogued type, on create and update
	// RateLimit is the requests per second sent to it at most, across replicas; null = no limit.
	RateLimit *float64 `json:"rate_limit"`
	// Filter is the CEL expression an event must satisfy to be delivered; "" = none.
	Filter string `json:"filter"`
	// Transform is the CEL expression producing the body sent; "" = the event's body.
	Transform string `json:"transform"`
	// ProxyURL is the endpoint's own CONNECT proxy; "" = the deployment's, if any.
	ProxyURL string `json:"proxy_url"`
	// TLSClientCertificate is the client certificate presented (mTLS), "" = none; its key is never shown.
	TLSClientCertificate string `json:"tls_client_certificate"`
	// TLSCABundle is what the endpoint's certificate is verified against; "" = the system roots.
	TLSCABundle string `json:"tls_ca_bundle"`
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
		ConsecutiveFailures: s.Health.ConsecutiveFailures, Headers: s.Headers.redacted(), RateLimit: s.RateLimit, Filter: s.Filter, Transform: s.Transform,
		ProxyURL: s.ProxyURL, TLSClientCertificate: s.TLSClientCertificate, TLSCABundle: s.TLSCABundle,
		CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC(), Version: s.Version.String(),
	}
}

type createSubscriptionIn struct {
	Body createSubscriptionRequest
}

func (h handlers) createSubscription(ctx context.Context, in *createSubscriptionIn) (*httpapi.Created[subscriptionResponse], error) {
	sub, secret, err := h.s.CreateSubscription(ctx, in.Body.input())
	if err != nil {
		return nil, err
	}
	resp := toSubscriptionResponse(sub)
	resp.Secret = secret
	resp.Warnings = h.s.patternWarnings(sub.EventTypes)
	return &httpapi.Created[subscriptionResponse]{ETag: resp.Version, Location: httpapi.APIPrefix + "/webhooks/subscriptions/" + sub.ID.String(), Body: resp}, nil
}

type subscriptionCursor struct {
	After uuid.UUID `json:"after"`
}

type listIn struct {
	Page httpapi.Page
}

type listOut[T any] = httpapi.ListOut[T]

func (h handlers) listSubscriptions(ctx context.Context, in *listIn) (*listOut[subscriptionResponse], error) {
	return httpapi.PageOf(in.Page, func(cur subscriptionCursor, limit int) ([]Subscription, error) {
		return h.s.Subscriptions(ctx, cur.After, limit)
	}, func(last Subscription) subscriptionCursor { return subscriptionCursor{After: last.ID} },
		func(s *Subscription) subscriptionResponse { return toSubscriptionResponse(*s) })
}

func (h handlers) getSubscription(ctx context.Context, in *httpapi.ByID) (*subscriptionOut, error) {
	sub, err := h.s.Subscription(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return subscriptionAnswer(toSubscriptionResponse(sub)), nil
}

type updateSubscriptionIn struct {
	ID   uuid.UUID `path:"id"`
	If   concurrency.Precondition
	Body updateSubscriptionRequest
}

func (h handlers) updateSubscription(ctx context.Context, in *updateSubscriptionIn) (*subscriptionOut, error) {
	sub, err := h.s.UpdateSubscription(ctx, in.ID, in.Body.patch(), in.If)
	if err != nil {
		return nil, err
	}
	resp := toSubscriptionResponse(sub)
	if in.Body.EventTypes != nil {
		resp.Warnings = h.s.patternWarnings(sub.EventTypes)
	}
	return subscriptionAnswer(resp), nil
}

type noContent struct{}

func (h handlers) deleteSubscription(ctx context.Context, in *writeByID) (*noContent, error) {
	return &noContent{}, h.s.DeleteSubscription(ctx, in.ID, in.If)
}

// emptyBodyIn is a write on one resource that takes no fields: an empty body or {}.
type emptyBodyIn struct {
	ID   uuid.UUID `path:"id"`
	If   concurrency.Precondition
	Body struct{} `required:"false"`
}

type rotateSecretRequest struct {
	ExpirePreviousIn string `json:"expire_previous_in,omitempty" doc:"how long the secret being replaced keeps signing beside the new one: a duration from \"0s\" (not at all) to \"168h\" (7 days), such as \"30m\" or \"48h\"; default \"24h\". Secrets rotated out earlier keep their own expiry."`
}

type rotateSecretIn struct {
	ID   uuid.UUID `path:"id"`
	If   concurrency.Precondition
	Body rotateSecretRequest `required:"false"`
}

func (h handlers) rotateSecret(ctx context.Context, in *rotateSecretIn) (*subscriptionOut, error) {
	sub, secret, err := h.s.RotateSecret(ctx, in.ID, in.Body.ExpirePreviousIn, in.If)
	if err != nil {
		return nil, err
	}
	resp := toSubscriptionResponse(sub)
	resp.Secret = secret
	return subscriptionAnswer(resp), nil
}

// --- events

type publishEventRequest struct {
	ID   string             `json:"id,omitempty" doc:"the client's id; the same id again is a no-op"`
	Type string             `json:"type"`
	Data httpapi.JSONObject `json:"data" doc:"the event's payload, a JSON object"`
}

type publishEventResponse struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Deliveries int    `json:"deliveries"`
	Duplicate  bool   `json:"duplicate,omitempty" doc:"true (with 200) when an event with this id, type and data was already accepted: nothing new happens"`
}

type publishEventIn struct {
	Body publishEventRequest
}

type publishEventOut struct {
	Status int // 202, or 200 for a duplicate
	Body   publishEventResponse
}

func (h handlers) publishEvent(ctx context.Context, in *publishEventIn) (*publishEventOut, error) {
	res, err := h.s.PublishEvent(ctx, EventInput{ID: in.Body.ID, Type: in.Body.Type, Data: json.RawMessage(in.Body.Data)})
	if err != nil {
		return nil, err
	}
	out := &publishEventOut{Status: http.StatusAccepted,
		Body: publishEventResponse(res)}
	if res.Duplicate {
		out.Status = http.StatusOK // the event was already accepted: nothing new happened
	}
	return out, nil
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
	Payload        json.RawMessage    `json:"payload,omitempty"` // detail only: the body the attempts send (the subscription's transformation of the event, if it has one)
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

type listDeliveriesIn struct {
	Page           httpapi.Page
	Status         string    `query:"status" enum:"pending,succeeded,failed"`
	SubscriptionID uuid.UUID `query:"subscription_id"`
	EventType      string    `query:"event_type"`
}

func (h handlers) listDeliveries(ctx context.Context, in *listDeliveriesIn) (*listOut[deliveryResponse], error) {
	f := DeliveryFilter{Status: DeliveryStatus(in.Status), SubscriptionID: in.SubscriptionID, EventType: in.EventType}
	if f.EventType != "" {
		if err := eventtype.Validate(f.EventType); err != nil {
			return nil, httpapi.InvalidQuery("event_type", err.Error())
		}
	}
	return httpapi.PageOf(in.Page, func(cur deliveryCursor, limit int) ([]Delivery, error) {
		return h.s.Deliveries(ctx, f, cur.Before, limit)
	}, func(last Delivery) deliveryCursor { return deliveryCursor{Before: last.ID} },
		func(d *Delivery) deliveryResponse { return toDeliveryResponse(*d) })
}

type deliveryOut = httpapi.Versioned[deliveryResponse]

func (h handlers) getDelivery(ctx context.Context, in *httpapi.ByID) (*deliveryOut, error) {
	d, attempts, err := h.s.Delivery(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	payload, err := h.s.deliveryPayload(ctx, d)
	if err != nil {
		return nil, err
	}
	resp := toDeliveryResponse(d)
	resp.Attempts = toAttemptResponses(attempts)
	resp.Payload = payload
	return &deliveryOut{ETag: resp.Version, Body: resp}, nil
}

func (h handlers) redeliver(ctx context.Context, in *emptyBodyIn) (*deliveryOut, error) {
	d, err := h.s.Redeliver(ctx, in.ID, in.If)
	if err != nil {
		return nil, err
	}
	resp := toDeliveryResponse(d)
	return &deliveryOut{ETag: resp.Version, Body: resp}, nil
}
