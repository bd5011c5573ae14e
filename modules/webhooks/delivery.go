package webhooks

import (
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/tenancy"
)

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

// Delivery statuses: pending until it succeeds or its retry schedule is exhausted.
const (
	StatusPending   DeliveryStatus = "pending"
	StatusSucceeded DeliveryStatus = "succeeded"
	StatusFailed    DeliveryStatus = "failed"
)

// Trigger says why an attempt was made.
type Trigger string

// Attempts made by the schedule (the first and the retries) are scheduled; those caused by a
// redelivery request are redeliver.
const (
	TriggerScheduled Trigger = "scheduled"
	TriggerRedeliver Trigger = "redeliver"
)

// Delivery is one event to one subscription. While pending it is owned by whoever holds ClaimID;
// every change is saved with the xmin check, so of two writers that loaded the same version only
// the first to commit wins, and the other gets a *concurrency.ConflictError.
type Delivery struct {
	ID uuid.UUID `gorm:"column:id;primaryKey"`
	tenancy.Owned
	SubscriptionID uuid.UUID      `gorm:"column:subscription_id"`
	EventID        string         `gorm:"column:event_id"`
	EventType      string         `gorm:"column:event_type"`
	Status         DeliveryStatus `gorm:"column:status"`
	AttemptCount   int            `gorm:"column:attempt_count"`
	// RoundFailures counts failed attempts since creation or the last redelivery; it indexes the retry schedule.
	RoundFailures  int        `gorm:"column:round_failures"`
	NextTrigger    Trigger    `gorm:"column:next_trigger"`
	NextAttemptAt  *time.Time `gorm:"column:next_attempt_at"` // due time, or the end of the lease while claimed
	ClaimID        *uuid.UUID `gorm:"column:claim_id"`
	SentClaimID    *uuid.UUID `gorm:"column:sent_claim_id"` // the claim whose attempt has started: one claim sends once
	ClaimedBy      string     `gorm:"column:claimed_by"`    // instance holding the claim: the claimer, then the sender
	RateSlotAt     *time.Time `gorm:"column:rate_slot_at"`  // send time reserved under the rate limit while put back
	LastStatusCode *int       `gorm:"column:last_status_code"`
	LastError      string     `gorm:"column:last_error"`
	CreatedAt      time.Time  `gorm:"column:created_at"`
	UpdatedAt      time.Time  `gorm:"column:updated_at"`

	Version concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

// TableName is the module's table.
func (Delivery) TableName() string { return "webhook_deliveries" }

// newDelivery is born pending and claimed: its DeliveryRequested leaves in the same transaction.
func newDelivery(subID uuid.UUID, eventID, eventType string, now time.Time, lease time.Duration, by string) (*Delivery, uuid.UUID, error) {
	d, err := newWaitingDelivery(subID, eventID, eventType, now)
	if err != nil {
		return nil, uuid.Nil, err
	}
	return d, d.Claim(now, lease, by), nil
}

// newWaitingDelivery is a pending delivery claimed by nobody, due at now: the sweep claims it.
func newWaitingDelivery(subID uuid.UUID, eventID, eventType string, now time.Time) (*Delivery, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	return &Delivery{
		ID: id, SubscriptionID: subID, EventID: eventID, EventType: eventType,
		Status: StatusPending, NextTrigger: TriggerScheduled, NextAttemptAt: &now, CreatedAt: now, UpdatedAt: now,
	}, nil
}

// Claim takes ownership of a pending delivery for instance by: a fresh claim id, and next_attempt_at
// pushed to the end of the lease so the sweep leaves it alone until the holder had ample time to finish.
func (d *Delivery) Claim(now time.Time, lease time.Duration, by string) uuid.UUID {
	claim := uuid.New()
	due := now.Add(lease)
	d.ClaimID, d.NextAttemptAt, d.UpdatedAt, d.ClaimedBy = &claim, &due, now, by
	return claim
}

// keptLease is the lease a take must find left to keep it (the write, the send, half the slack beyond):
// a take soon after the claim then changes no indexed column, so PostgreSQL updates the row in place (HOT).
func keptLease(lease, sendTimeout, write time.Duration) time.Duration {
	return sendTimeout + write + (lease-sendTimeout-write)/2
}

// MarkSucceeded ends the delivery after a 2xx and clears the claim.
func (d *Delivery) MarkSucceeded(now time.Time, statusCode int) {
	d.Status, d.ClaimID, d.NextAttemptAt, d.ClaimedBy = StatusSucceeded, nil, nil, ""
	d.LastStatusCode, d.LastError = &statusCode, ""
	d.UpdatedAt = now
}

// MarkFailedRetryingAfter records a failed attempt and clears the claim. It schedules the next attempt
// after schedule[n] (n = failures in this round) with jitter, or gives up (final = true) once the
// schedule is exhausted. A positive retryAfter (the receiver's Retry-After, already capped) replaces
// the schedule's delay, without jitter; the schedule still bounds the attempts.
func (d *Delivery) MarkFailedRetryingAfter(now time.Time, statusCode int, message string, schedule []time.Duration,
	jitter func(time.Duration) time.Duration, retryAfter time.Duration) (final bool) {
	d.RoundFailures++
	d.ClaimID, d.ClaimedBy = nil, ""
	d.LastStatusCode = nil
	if statusCode != 0 {
		d.LastStatusCode = &statusCode
	}
	d.LastError = message
	d.UpdatedAt = now
	if d.RoundFailures > len(schedule) {
		d.Status, d.NextAttemptAt = StatusFailed, nil
		return true
	}
	delay := jitter(schedule[d.RoundFailures-1])
	if retryAfter > 0 {
		delay = retryAfter
	}
	due := now.Add(delay)
	d.NextAttemptAt, d.NextTrigger = &due, TriggerScheduled
	return false
}

// Redeliver makes the delivery pending again in any status, with a fresh retry round, and claims it.
func (d *Delivery) Redeliver(now time.Time, lease time.Duration, by string) uuid.UUID {
	d.Status, d.RoundFailures, d.NextTrigger = StatusPending, 0, TriggerRedeliver
	return d.Claim(now, lease, by)
}

// jitter spreads a retry delay uniformly over ±20 % so failing receivers are not hit in lockstep.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
