package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
)

// store is the module's data access; every call runs in the unit of work carried by ctx, if any.
type store struct{ db *database.DB }

func (s store) conn(ctx context.Context) *gorm.DB { return s.db.Conn(ctx) }

func notFound(err error, entity string, id any) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return apperr.NotFound(entity, toString(id))
	}
	return err
}

func toString(id any) string {
	switch v := id.(type) {
	case string:
		return v
	case uuid.UUID:
		return v.String()
	default:
		return ""
	}
}

func (s store) createSubscription(ctx context.Context, sub *Subscription) error {
	return s.conn(ctx).Create(sub).Error
}

// subscription loads a live (not deleted) subscription.
func (s store) subscription(ctx context.Context, id uuid.UUID) (*Subscription, error) {
	var sub Subscription
	err := s.conn(ctx).Where("id = ? AND deleted_at IS NULL", id).Take(&sub).Error
	if err != nil {
		return nil, notFound(err, "subscription", id)
	}
	return &sub, nil
}

// takeClaim starts the attempt of a claim: in one statement it applies Delivery.CanStartAttempt
// and StartAttempt as a conditional UPDATE (pending, claim current, not yet taken → sent_claim_id =
// claim) and returns the taken delivery with its new row version, its subscription (even deleted, so
// the delivery can be given up with a reason) and its event: the consumer's only read. Of two
// handlers of the same claim, on any replicas, the row lock lets one through; the other re-checks
// the committed row, matches nothing and gets taken = false, as does a stale claim. The returned
// version is what the outcome's xmin check compares against.
func (s store) takeClaim(ctx context.Context, id, claim uuid.UUID, leaseUntil time.Time) (d *Delivery, sub *Subscription, ev *eventRecord, taken bool, err error) {
	d, sub, ev = &Delivery{}, &Subscription{}, &eventRecord{}
	err = s.conn(ctx).Raw(`WITH taken AS (
		UPDATE webhook_deliveries SET sent_claim_id = claim_id, next_attempt_at = ?
		WHERE id = ? AND status = ? AND claim_id = ? AND sent_claim_id IS DISTINCT FROM claim_id
		RETURNING id, subscription_id, event_id, event_type, status, attempt_count, round_failures,
			next_trigger, next_attempt_at, claim_id, sent_claim_id, last_status_code, last_error,
			created_at, updated_at, xmin)
		SELECT d.id, d.subscription_id, d.event_id, d.event_type, d.status, d.attempt_count,
			d.round_failures, d.next_trigger, d.next_attempt_at, d.claim_id, d.sent_claim_id,
			d.last_status_code, d.last_error, d.created_at, d.updated_at, d.xmin,
			s.url, s.enabled, s.deleted_at, s.secret, s.previous_secret, s.previous_secret_expires_at,
			e.type, e.data, e.created_at
		FROM taken d
		JOIN webhook_subscriptions s ON s.id = d.subscription_id
		JOIN webhook_events e ON e.id = d.event_id`, leaseUntil, id, StatusPending, claim).Row().Scan(
		&d.ID, &d.SubscriptionID, &d.EventID, &d.EventType, &d.Status, &d.AttemptCount,
		&d.RoundFailures, &d.NextTrigger, &d.NextAttemptAt, &d.ClaimID, &d.SentClaimID,
		&d.LastStatusCode, &d.LastError, &d.CreatedAt, &d.UpdatedAt, &d.Version,
		&sub.URL, &sub.Enabled, &sub.DeletedAt, &sub.Secret, &sub.PreviousSecret, &sub.PreviousSecretExpiresAt,
		&ev.Type, &ev.Data, &ev.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("take claim %s of delivery %s: %w", claim, id, err)
	}
	sub.ID, ev.ID = d.SubscriptionID, d.EventID
	return d, sub, ev, true, nil
}

func (s store) subscriptions(ctx context.Context, after uuid.UUID, limit int) ([]Subscription, error) {
	var subs []Subscription
	q := s.conn(ctx).Where("deleted_at IS NULL")
	if after != uuid.Nil {
		q = q.Where("id > ?", after)
	}
	err := q.Order("id").Limit(limit).Find(&subs).Error
	return subs, err
}

// activeSubscriptions are those events fan out to.
func (s store) activeSubscriptions(ctx context.Context) ([]Subscription, error) {
	var subs []Subscription
	err := s.conn(ctx).Where("enabled AND deleted_at IS NULL").Order("id").Find(&subs).Error
	return subs, err
}

// saveSubscription writes a loaded subscription with the xmin check.
func (s store) saveSubscription(ctx context.Context, sub *Subscription) error {
	return s.conn(ctx).Save(sub).Error
}

// insertEvent stores an event unless one with its id exists; inserted is false for a duplicate.
func (s store) insertEvent(ctx context.Context, ev *eventRecord) (inserted bool, err error) {
	res := s.conn(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(ev)
	return res.RowsAffected == 1, res.Error
}

func (s store) event(ctx context.Context, id string) (*eventRecord, error) {
	var ev eventRecord
	if err := s.conn(ctx).Where("id = ?", id).Take(&ev).Error; err != nil {
		return nil, notFound(err, "event", id)
	}
	return &ev, nil
}

func (s store) countDeliveries(ctx context.Context, eventID string) (int, error) {
	var n int64
	err := s.conn(ctx).Model(&Delivery{}).Where("event_id = ?", eventID).Count(&n).Error
	return int(n), err
}

func (s store) createDeliveries(ctx context.Context, ds []*Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	return s.conn(ctx).Create(ds).Error
}

func (s store) delivery(ctx context.Context, id uuid.UUID) (*Delivery, error) {
	var d Delivery
	if err := s.conn(ctx).Where("id = ?", id).Take(&d).Error; err != nil {
		return nil, notFound(err, "delivery", id)
	}
	return &d, nil
}

// saveDelivery writes a loaded delivery with the xmin check: a stale one fails with a ConflictError.
func (s store) saveDelivery(ctx context.Context, d *Delivery) error {
	return s.conn(ctx).Save(d).Error
}

// dueDeliveries are pending rows whose next attempt (or expired lease) is due, oldest due first.
func (s store) dueDeliveries(ctx context.Context, now time.Time, limit int) ([]*Delivery, error) {
	var ds []*Delivery
	err := s.conn(ctx).Where("status = ? AND next_attempt_at <= ?", StatusPending, now).
		Order("next_attempt_at").Limit(limit).Find(&ds).Error
	return ds, err
}

func (s store) countDue(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.conn(ctx).Model(&Delivery{}).Where("status = ? AND next_attempt_at <= ?", StatusPending, now).Count(&n).Error
	return int(n), err
}

// recordOutcome writes a delivery's new state and its attempt in one statement, only if the row
// still has the version read before the send (xmin = the loaded version, the check the concurrency
// plugin adds to Save). The hot path of every delivery: one round trip instead of the five of
// BEGIN, INSERT, UPDATE, COMMIT and the read-back. A superseded row yields an error wrapping
// concurrency.ErrConflict and writes nothing.
func (s store) recordOutcome(ctx context.Context, d *Delivery, a *Attempt) error {
	res := s.conn(ctx).Exec(`WITH updated AS (
		UPDATE webhook_deliveries SET status = ?, attempt_count = ?, round_failures = ?, next_trigger = ?,
			next_attempt_at = ?, claim_id = ?, last_status_code = ?, last_error = ?, updated_at = ?
		WHERE id = ? AND xmin = ?
		RETURNING id)
		INSERT INTO webhook_attempts (id, delivery_id, number, trigger, started_at, duration_ms, status_code,
			error_class, error, response_excerpt)
		SELECT ?, id, ?, ?, ?, ?, ?, ?, ?, ? FROM updated`,
		d.Status, d.AttemptCount, d.RoundFailures, d.NextTrigger, d.NextAttemptAt, d.ClaimID, d.LastStatusCode,
		d.LastError, d.UpdatedAt, d.ID, uint32(d.Version),
		a.ID, a.Number, a.Trigger, a.StartedAt, a.DurationMS, a.StatusCode, a.ErrorClass, a.Error, a.ResponseExcerpt)
	if res.Error != nil {
		return fmt.Errorf("record outcome of delivery %s: %w", d.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("delivery %s changed since it was read: %w", d.ID, concurrency.ErrConflict)
	}
	return nil
}

func (s store) attempts(ctx context.Context, deliveryID uuid.UUID) ([]Attempt, error) {
	var as []Attempt
	err := s.conn(ctx).Where("delivery_id = ?", deliveryID).Order("number").Find(&as).Error
	return as, err
}

// DeliveryFilter narrows the delivery list; zero fields do not filter.
type DeliveryFilter struct {
	Status         DeliveryStatus
	SubscriptionID uuid.UUID
	EventType      string
}

// deliveries lists newest first, keyset-paginated on the (time-ordered v7) id.
func (s store) deliveries(ctx context.Context, f DeliveryFilter, before uuid.UUID, limit int) ([]Delivery, error) {
	q := s.conn(ctx).Model(&Delivery{})
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.SubscriptionID != uuid.Nil {
		q = q.Where("subscription_id = ?", f.SubscriptionID)
	}
	if f.EventType != "" {
		q = q.Where("event_type = ?", f.EventType)
	}
	if before != uuid.Nil {
		q = q.Where("id < ?", before)
	}
	var ds []Delivery
	err := q.Order("id DESC").Limit(limit).Find(&ds).Error
	return ds, err
}
