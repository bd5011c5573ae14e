package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/messaging"
)

// Attempt is one HTTP request made for a delivery, whatever its outcome.
type Attempt struct {
	ID              uuid.UUID `gorm:"column:id;primaryKey"`
	DeliveryID      uuid.UUID `gorm:"column:delivery_id"`
	Number          int       `gorm:"column:number"`
	Trigger         Trigger   `gorm:"column:trigger"`
	StartedAt       time.Time `gorm:"column:started_at"`
	DurationMS      int       `gorm:"column:duration_ms"`
	StatusCode      *int      `gorm:"column:status_code"`
	ErrorClass      string    `gorm:"column:error_class"`
	Error           string    `gorm:"column:error"`
	ResponseExcerpt string    `gorm:"column:response_excerpt"`
}

// TableName is the module's table.
func (Attempt) TableName() string { return "webhook_attempts" }

// handleDeliveryRequested attempts one claimed delivery. It first TAKES the claim: one conditional
// UPDATE (store.takeClaim) marks the claim's attempt as started and reads what to send, so of all
// copies of one request, on any replica, at most one handler sends; a stale or duplicated copy
// matches no row and sends nothing. The take restarts the lease (next_attempt_at = now + lease, and
// the send timeout is shorter), so the sweep cannot claim the row again while the send runs. A
// handler that dies after the take leaves the row pending: the sweep claims it afresh after the lease and that new
// claim is sent once more — at least once overall, at most one send per claim. The outcome is
// committed with the xmin check against the take's version: if a redelivery changed the row
// meanwhile, this outcome is dropped and the redelivery's attempt counts.
func (s *Service) handleDeliveryRequested(ctx context.Context, e messaging.Event) error {
	var req contract.DeliveryRequestedPayload
	if err := e.Decode(&req); err != nil {
		return err
	}
	d, sub, ev, taken, err := s.store.takeClaim(ctx, req.DeliveryID, req.ClaimID, s.now().Add(s.cfg.ClaimLease))
	if err != nil {
		return err
	}
	if !taken {
		s.metrics.stale.Inc()
		return nil
	}
	if !sub.active() {
		return s.giveUp(ctx, d, "subscription deleted or disabled: not sent")
	}
	body, err := ev.body()
	if err != nil {
		return err
	}
	keys, err := sub.signingKeys(s.now())
	if err != nil {
		return err
	}

	ctx, span := s.startAttempt(ctx, d)
	res := s.sender.send(ctx, outgoing{URL: sub.URL, MessageID: ev.ID, Body: body, Keys: keys})
	endAttempt(span, res)
	s.metrics.observeAttempt(res)
	return s.recordOutcome(ctx, d, res)
}

// recordOutcome stores the attempt and the delivery's new state atomically, with the xmin check.
func (s *Service) recordOutcome(ctx context.Context, d *Delivery, res sendResult) error {
	attemptID, err := uuid.NewV7()
	if err != nil {
		return err
	}
	attempt := &Attempt{
		ID: attemptID, DeliveryID: d.ID, Number: d.NextAttemptNumber(), Trigger: d.NextTrigger,
		StartedAt: res.StartedAt.UTC().Truncate(time.Microsecond), DurationMS: int(res.Duration.Milliseconds()),
		ErrorClass: res.ErrorClass, Error: res.Error, ResponseExcerpt: res.Excerpt,
	}
	if res.StatusCode != 0 {
		code := res.StatusCode
		attempt.StatusCode = &code
	}
	outcome, final := "succeeded", false
	if res.Succeeded() {
		d.MarkSucceeded(s.now(), res.StatusCode)
	} else {
		final = d.MarkFailed(s.now(), res.StatusCode, res.ErrorClass+": "+res.Error, s.cfg.RetrySchedule, s.jitter)
		outcome = "retrying"
		if final {
			outcome = "failed"
		}
	}
	if final {
		// The last failure also announces itself: outcome and event commit together.
		err = s.db.WithTx(ctx, func(ctx context.Context) error {
			if err := s.store.recordOutcome(ctx, d, attempt); err != nil {
				return err
			}
			return s.publishFailed(ctx, d)
		})
	} else {
		err = s.store.recordOutcome(ctx, d, attempt)
	}
	if errors.Is(err, concurrency.ErrConflict) {
		s.log.Info("delivery changed while it was being sent (redelivered): outcome dropped",
			"delivery_id", d.ID, "attempt", attempt.Number)
		s.metrics.outcome("dropped")
		return nil
	}
	if err != nil {
		return err
	}
	s.metrics.outcome(outcome)
	return nil
}

// giveUp fails a delivery whose subscription no longer takes events; nothing is sent. Only the
// handler that took the claim gets here, and its save is xmin-checked against the take's version.
func (s *Service) giveUp(ctx context.Context, d *Delivery, reason string) error {
	d.GiveUp(s.now(), reason)
	err := s.db.WithTx(ctx, func(ctx context.Context) error { return s.store.saveDelivery(ctx, d) })
	if errors.Is(err, concurrency.ErrConflict) {
		return nil
	}
	if err == nil {
		s.metrics.outcome("cancelled")
	}
	return err
}

// publishFailed tells other modules a delivery exhausted its schedule.
func (s *Service) publishFailed(ctx context.Context, d *Delivery) error {
	e, err := messaging.NewEvent(ctx, contract.Source, contract.DeliveryFailed, contract.DeliveryFailedPayload{
		DeliveryID: d.ID, SubscriptionID: d.SubscriptionID, EventID: d.EventID, EventType: d.EventType,
		AttemptCount: d.AttemptCount, LastStatusCode: d.LastStatusCode, LastError: d.LastError,
	})
	if err != nil {
		return err
	}
	return s.events.Publish(ctx, e)
}
