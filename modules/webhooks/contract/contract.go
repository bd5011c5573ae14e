// Package contract holds the names and payloads of the events the webhooks module publishes,
// the only part of the module other modules may import.
package contract

import (
	"time"

	"github.com/google/uuid"
)

// Event types published by the webhooks module.
const (
	// DeliveryRequested asks a consumer to attempt one claimed delivery (internal to the module).
	DeliveryRequested = "webhooks.delivery_requested"
	// DeliveryFailed says a delivery exhausted its retry schedule.
	DeliveryFailed = "webhooks.delivery_failed"
)

// Source is the Source of every event the module publishes.
const Source = "webhooks"

// DeliveryRequestedPayload names the delivery and the claim the consumer must still hold.
type DeliveryRequestedPayload struct {
	DeliveryID uuid.UUID `json:"delivery_id"`
	ClaimID    uuid.UUID `json:"claim_id"`
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

// SubscriptionDisabledPayload names the subscription and why it was disabled.
type SubscriptionDisabledPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	URL            string    `json:"url"`
	Reason         string    `json:"reason"`
	DisabledAt     time.Time `json:"disabled_at"`
}
