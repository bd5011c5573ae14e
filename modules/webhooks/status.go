package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/messaging"
)

// SubscriptionStatus says whether a subscription's deliveries are sent.
type SubscriptionStatus string

// Subscription statuses. Deliveries of a paused or disabled subscription wait, pending, and are sent
// from where they were once it is active again; a paused one still gets deliveries for new events.
const (
	StatusActive   SubscriptionStatus = "active"
	StatusPaused   SubscriptionStatus = "paused"
	StatusDisabled SubscriptionStatus = "disabled"
)

// Why a subscription was disabled.
const (
	ReasonManual  = "manual"  // by a client (status or enabled)
	ReasonFailing = "failing" // every attempt failed for Config.DisableAfter, at least Config.DisableMinAttempts of them
	ReasonGone    = "gone"    // the receiver answered 410 Gone
)

func parseSubscriptionStatus(s string) (SubscriptionStatus, error) {
	switch st := SubscriptionStatus(s); st {
	case StatusActive, StatusPaused, StatusDisabled:
		return st, nil
	}
	return "", errors.New("must be active, paused or disabled")
}

func manualReason(s SubscriptionStatus) string {
	if s == StatusDisabled {
		return ReasonManual
	}
	return ""
}

// setStatus moves the subscription to status; reason only counts for disabled. enabled follows.
func (s *Subscription) setStatus(status SubscriptionStatus, reason string) {
	s.Status, s.DisabledReason = status, ""
	if status == StatusDisabled {
		s.DisabledReason = reason
	}
	s.Enabled = status == StatusActive
}

// SubscriptionHealth is what the recorded attempts say about a subscription's endpoint. A success
// refreshes LastSuccessAt at most once a second unless it ends a run of failures.
type SubscriptionHealth struct {
	SubscriptionID      uuid.UUID  `gorm:"column:subscription_id;primaryKey"`
	LastSuccessAt       *time.Time `gorm:"column:last_success_at"`
	LastFailureAt       *time.Time `gorm:"column:last_failure_at"`
	FailingSince        *time.Time `gorm:"column:failing_since"`
	ConsecutiveFailures int        `gorm:"column:consecutive_failures"`
}

// TableName is the module's table.
func (SubscriptionHealth) TableName() string { return "webhook_subscription_health" }

// shouldDisable is the auto-disable rule: every attempt failed for at least after, and there were
// at least minAttempts of them (so a single failure after a long silence disables nothing).
func (h SubscriptionHealth) shouldDisable(now time.Time, after time.Duration, minAttempts int) bool {
	return h.FailingSince != nil && !h.FailingSince.After(now.Add(-after)) && h.ConsecutiveFailures >= minAttempts
}

// PauseSubscription stops sending to a subscription: its deliveries wait and new events still add to them.
func (s *Service) PauseSubscription(ctx context.Context, id uuid.UUID, pre concurrency.Precondition) (Subscription, error) {
	return s.changeStatus(ctx, id, pre, StatusPaused)
}

// ResumeSubscription makes a paused or disabled subscription active again; its waiting deliveries are
// sent from where they were, and its failure count starts afresh.
func (s *Service) ResumeSubscription(ctx context.Context, id uuid.UUID, pre concurrency.Precondition) (Subscription, error) {
	return s.changeStatus(ctx, id, pre, StatusActive)
}

// changeStatus moves a subscription to status under the row lock subscriptionChange takes, so no
// take can still see the old status once it commits.
func (s *Service) changeStatus(ctx context.Context, id uuid.UUID, pre concurrency.Precondition, status SubscriptionStatus) (Subscription, error) {
	sub, err := database.Update(ctx, s.db, s.subscriptionChange(id, pre, func(ctx context.Context, sub *Subscription) error {
		was := sub.Status
		sub.setStatus(status, manualReason(status))
		return s.afterStatusChange(ctx, sub, was)
	}))
	return s.withHealth(ctx, sub, err)
}

// afterStatusChange runs in the transaction that changed a subscription's status.
func (s *Service) afterStatusChange(ctx context.Context, sub *Subscription, was SubscriptionStatus) error {
	if sub.Status == was {
		return nil
	}
	if sub.Status == StatusActive {
		// Requests handled while it was not active sent nothing and left their claims untaken: due now.
		if err := s.store.releaseWaiting(ctx, sub.ID, s.now()); err != nil {
			return err
		}
		return s.store.resetHealth(ctx, sub.ID)
	}
	if sub.Status == StatusDisabled {
		return s.publishDisabled(ctx, sub)
	}
	return nil
}

// disableSubscription disables a subscription for reason unless it is already not active (two
// failures crossing the threshold at once disable it, and announce it, once). stillDue re-checks the
// rule on the locked row's health.
func (s *Service) disableSubscription(ctx context.Context, id uuid.UUID, reason string, stillDue func(SubscriptionHealth) bool) error {
	return s.db.WithTx(ctx, func(ctx context.Context) error {
		sub, err := s.store.subscriptionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if sub.Status != StatusActive {
			return nil
		}
		if stillDue != nil {
			h, err := s.store.health(ctx, id)
			if err != nil || !stillDue(h) {
				return err
			}
		}
		sub.setStatus(StatusDisabled, reason)
		sub.UpdatedAt = s.now()
		if err := s.store.saveSubscription(ctx, sub); err != nil {
			return err
		}
		s.log.WarnContext(ctx, "webhook subscription disabled", "subscription_id", id, "reason", reason)
		return s.publishDisabled(ctx, sub)
	})
}

// publishDisabled announces webhooks.subscription_disabled in the disabling transaction.
func (s *Service) publishDisabled(ctx context.Context, sub *Subscription) error {
	e, err := messaging.NewEvent(ctx, contract.Source, contract.SubscriptionDisabled, contract.SubscriptionDisabledPayload{
		SubscriptionID: sub.ID, URL: sub.URL, Reason: sub.DisabledReason, DisabledAt: sub.UpdatedAt.UTC(),
	})
	if err != nil {
		return fmt.Errorf("subscription disabled event: %w", err)
	}
	return s.events.Publish(ctx, e)
}
