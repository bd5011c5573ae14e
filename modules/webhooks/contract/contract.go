// Package contract holds the names and payloads of the events the webhooks module publishes,
// the only part of the module other modules may import.
package contract

import (
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/module"
)

// Event types published by the webhooks module.
const (
	// DeliveriesRequested asks a consumer to attempt claimed deliveries of one tenant (internal to the module).
	DeliveriesRequested = "webhooks.deliveries_requested"
	// DeliveryRequested asks a consumer to attempt one claimed delivery: what versions before
	// DeliveriesRequested published, still consumed so that none of their requests is lost in an upgrade.
	DeliveryRequested = "webhooks.delivery_requested"
	// DeliveryFailed says a delivery exhausted its retry schedule.
	DeliveryFailed = "webhooks.delivery_failed"
)

// Source is the Source of every event the module publishes.
const Source = "webhooks"

// DeliveriesRequestedPayload names claimed deliveries of the message's tenant; a consumer attempts
// each of them as if it had a message of its own.
type DeliveriesRequestedPayload struct {
	Deliveries []DeliveryRequestedPayload `json:"deliveries"`
}

// DeliveryRequestedPayload names the delivery and the claim the consumer must still hold, its
// subscription, and the send time it reserved under its subscription's rate limit, if any.
type DeliveryRequestedPayload struct {
	DeliveryID     uuid.UUID  `json:"delivery_id"`
	ClaimID        uuid.UUID  `json:"claim_id"`
	SubscriptionID uuid.UUID  `json:"subscription_id,omitzero"`
	RateSlotAt     *time.Time `json:"rate_slot_at,omitempty"`
}

// DeliveryFailedPayload describes a delivery given up after its last attempt.
type DeliveryFailedPayload struct {
	DeliveryID     uuid.UUID `json:"delivery_id"`
	SubscriptionID uuid.UUID `json:"subscription_id"`
	EventID        string    `json:"event_id"`
	EventType      string    `json:"event_type"`
	AttemptCount   int       `json:"attempt_count"`
	LastStatusCode *int      `json:"last_status_code"`
	LastError      string    `json:"last_error"`
}

// SubscriptionDisabled says a subscription stopped being sent to: by a client, because every attempt
// failed for a long time (reason failing), or because its receiver answered 410 (reason gone).
const SubscriptionDisabled = "webhooks.subscription_disabled"

// TestEvent is the webhook event POST /webhooks/subscriptions/{id}/test sends to that subscription alone.
const TestEvent = "webhook.test"

// TestEventPayload is the data of a webhook.test event.
type TestEventPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id" format:"uuid"`
	Message        string    `json:"message"`
}

// Events are the module's public integration events: webhook subscribers receive them too, so an
// operator's own subscription to webhooks.* is told when an endpoint is disabled.
var Events = []module.EventType{
	{Type: SubscriptionDisabled, Description: "A webhook subscription was disabled: by a client, after a long run of failures, or on a 410 Gone.",
		Example: SubscriptionDisabledPayload{SubscriptionID: uuid.MustParse("0193a4d3-1f2e-7c3d-8a4b-5c6d7e8f9a02"),
			URL: "https://example.com/hooks", Reason: "failing", DisabledAt: time.Date(2026, 12, 1, 9, 31, 0, 0, time.UTC)}},
	{Type: TestEvent, Description: "A test event, sent on request to one subscription only.",
		Example: TestEventPayload{SubscriptionID: uuid.MustParse("0193a4d3-1f2e-7c3d-8a4b-5c6d7e8f9a02"), Message: TestEventMessage}},
}

// TestEventMessage is what every webhook.test event says.
const TestEventMessage = "A test event sent on request from Keelson."

// SubscriptionDisabledPayload names the subscription and why it was disabled.
type SubscriptionDisabledPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id" format:"uuid"`
	URL            string    `json:"url"`
	Reason         string    `json:"reason" enum:"manual,failing,gone"`
	DisabledAt     time.Time `json:"disabled_at"`
}
