package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/singleflight"
	"gorm.io/gorm"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/tenancy"
)

// rateTolerance is how late a reserved send may start; later, it reserves a new slot rather than
// crowd the next ones (so no second at the receiver sees more than rate + 1 requests).
const rateTolerance = 30 * time.Millisecond

// takeAhead is how long before its slot a rate-limited delivery is taken, so the take's round trip
// does not make the send late; the send itself waits for the slot.
const takeAhead = 200 * time.Millisecond

// termsTTL is how long a replica trusts the sending terms it read: a change applies within it.
const termsTTL = time.Second

// rateLead is how long before its reserved slot a put-back delivery becomes due: the sweep claims it
// within SweepInterval, so it reaches a handler before the slot and waits the rest in a timer.
func (s *Service) rateLead() time.Duration { return s.cfg.SweepInterval + 500*time.Millisecond }

// rateHorizon is how far ahead a handler waits for a slot in a timer; further, the delivery is put
// back until then. The claim's lease covers the wait and the send.
func (s *Service) rateHorizon() time.Duration {
	return min(2*s.rateLead(), (s.cfg.ClaimLease-s.cfg.SendTimeout)/2)
}

// attemptWithinLimits applies the subscription's rate limit, then the replica's send gate, then
// attempts. Waiting for either spends no attempt: the claim is not taken.
func (s *Service) attemptWithinLimits(ctx context.Context, req contract.DeliveryRequestedPayload) error {
	terms, err := s.terms.of(ctx, s.store, req.SubscriptionID, s.now())
	if err != nil {
		return err
	}
	if rate := terms.rate; rate > 0 {
		now := s.now()
		if req.RateSlotAt == nil || now.After(req.RateSlotAt.Add(rateTolerance)) {
			slot, err := s.store.reserveRateSlot(ctx, req.SubscriptionID, rate)
			if err != nil {
				return err
			}
			req.RateSlotAt = &slot
		}
		wait := req.RateSlotAt.Sub(now)
		if wait > s.rateHorizon() {
			s.metrics.putBack.WithLabelValues("rate_limit").Inc()
			return s.putBack(ctx, req, req.RateSlotAt.Add(-s.rateLead()), req.RateSlotAt)
		}
		if wait > takeAhead {
			// The handler returns; the claim, untaken, waits for its slot in a timer.
			detached := context.WithoutCancel(ctx)
			time.AfterFunc(wait-takeAhead, func() {
				if err := s.attemptAtSlot(detached, req, terms); err != nil {
					s.log.ErrorContext(detached, "rate-limited delivery not attempted at its slot", "delivery_id", req.DeliveryID, "error", err)
				}
			})
			return nil
		}
	}
	return s.attemptGated(ctx, req, terms)
}

// attemptAtSlot runs just before a reserved slot; a timer that fired too late reserves anew.
func (s *Service) attemptAtSlot(ctx context.Context, req contract.DeliveryRequestedPayload, terms sendingTerms) error {
	if req.RateSlotAt != nil && s.now().After(req.RateSlotAt.Add(rateTolerance)) {
		req.RateSlotAt = nil
		return s.attemptWithinLimits(ctx, req)
	}
	return s.attemptGated(ctx, req, terms)
}

// attemptGated attempts once the send gate admits the endpoint, waiting in its queue while a place is
// likely to free soon; else the delivery is put back.
func (s *Service) attemptGated(ctx context.Context, req contract.DeliveryRequestedPayload, terms sendingTerms) error {
	pass, refused := s.gate.await(ctx, req.SubscriptionID, terms.lastSucceeded)
	if err := ctx.Err(); pass == nil && err != nil {
		return err
	}
	if pass == nil && refused.hanging {
		// Its endpoint hangs, and is held by now: the sweep takes the delivery up again once the
		// claim's lease passed and the hold ended, and nothing is written meanwhile.
		s.metrics.putBack.WithLabelValues("endpoint_hanging").Inc()
		return nil
	}
	if pass == nil {
		s.metrics.putBack.WithLabelValues(refused.reason).Inc()
		return s.putBack(ctx, req, s.now().Add(refused.retryIn), req.RateSlotAt)
	}
	defer s.gate.release(pass)
	select {
	case s.handling <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.handling }()
	return s.attempt(ctx, req, pass)
}

// putBack releases an untaken claim until due, keeping a reserved rate slot, in a batch with the
// put-backs of the replica's other handlers (writePutBacks); a claim no longer current was handled
// elsewhere: nothing to do.
func (s *Service) putBack(ctx context.Context, req contract.DeliveryRequestedPayload, due time.Time, slot *time.Time) error {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return err
	}
	ok, err := s.putBacks.Do(ctx, putBackRequest{tenant: tenant, id: req.DeliveryID, claim: req.ClaimID, due: due, slot: slot})
	if err == nil && !ok {
		s.metrics.stale.Inc()
	}
	return err
}

// sendingTerms is what a replica reads of a subscription before it sends: its rate limit (0 when
// none, or when the subscription is gone), and whether its last attempt, on any replica, succeeded.
type sendingTerms struct {
	rate          float64
	lastSucceeded bool
}

// termsCache remembers subscriptions' sending terms for termsTTL; concurrent misses of one
// subscription share one read.
type termsCache struct {
	m     sync.Map
	reads singleflight.Group
}

type cachedTerms struct {
	terms sendingTerms
	at    time.Time
}

func (c *termsCache) of(ctx context.Context, st store, sub uuid.UUID, now time.Time) (sendingTerms, error) {
	if v, ok := c.m.Load(sub); ok && now.Sub(v.(cachedTerms).at) < termsTTL {
		return v.(cachedTerms).terms, nil
	}
	v, err, _ := c.reads.Do(sub.String(), func() (any, error) {
		terms, err := st.sendingTerms(ctx, sub)
		if err != nil {
			return sendingTerms{}, err
		}
		c.m.Store(sub, cachedTerms{terms: terms, at: now})
		return terms, nil
	})
	if err != nil {
		return sendingTerms{}, err
	}
	return v.(sendingTerms), nil
}

// sendingTerms reads a subscription's rate limit and health in one statement.
func (s store) sendingTerms(ctx context.Context, sub uuid.UUID) (sendingTerms, error) {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return sendingTerms{}, err
	}
	var rate sql.NullFloat64
	var succeeded bool
	err = s.conn(ctx).Raw(`SELECT s.rate_limit, `+succeededHealth+`
		FROM webhook_subscriptions s LEFT JOIN webhook_subscription_health h ON h.subscription_id = s.id
		WHERE s.tenant_id = ? AND s.id = ?`, tenant, sub).Row().Scan(&rate, &succeeded)
	if errors.Is(err, sql.ErrNoRows) {
		return sendingTerms{}, nil
	}
	if err != nil {
		return sendingTerms{}, fmt.Errorf("sending terms of subscription %s: %w", sub, err)
	}
	return sendingTerms{rate: rate.Float64, lastSucceeded: succeeded}, nil
}

// reserveRateSlot reserves the subscription's next send time by GCRA in one statement, across all
// replicas: the slot is the theoretical arrival time, pushed one emission interval (1/rate) further
// for the next reservation. The row lock of the upsert serializes concurrent reservations.
func (s store) reserveRateSlot(ctx context.Context, sub uuid.UUID, rate float64) (time.Time, error) {
	var slot time.Time
	err := s.conn(ctx).Raw(`INSERT INTO webhook_rate_limits AS r (subscription_id, tat)
		VALUES (@sub, clock_timestamp() + make_interval(secs => CAST(@secs AS double precision)))
		ON CONFLICT (subscription_id) DO UPDATE
			SET tat = greatest(r.tat, clock_timestamp()) + make_interval(secs => CAST(@secs AS double precision))
		RETURNING tat - make_interval(secs => CAST(@secs AS double precision))`,
		sql.Named("sub", sub), sql.Named("secs", 1/rate)).Row().Scan(&slot)
	if err != nil {
		return time.Time{}, fmt.Errorf("reserve a send slot of subscription %s: %w", sub, err)
	}
	return slot, nil
}

// subscriptionOf names a delivery's subscription, for requests published without it.
func (s store) subscriptionOf(ctx context.Context, delivery uuid.UUID) (uuid.UUID, bool, error) {
	var d Delivery
	err := s.conn(ctx).Select("subscription_id").Where("id = ?", delivery).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return uuid.Nil, false, nil
	}
	return d.SubscriptionID, err == nil, err
}

// untake gives back a claim taken for a send that did not happen (its rate slot passed): the claim is
// cleared, the attempt uncounted and its row removed, and the delivery is due now to reserve anew.
// If a redelivery changed the row meanwhile, only the unsent attempt's row goes.
func (s store) untake(ctx context.Context, t taken, now time.Time) error {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return err
	}
	err = s.conn(ctx).Exec(`WITH released AS (
		UPDATE webhook_deliveries SET claim_id = NULL, claimed_by = '', attempt_count = attempt_count - 1,
			next_attempt_at = ?, rate_slot_at = NULL
		WHERE tenant_id = ? AND id = ? AND xmin = ?
		RETURNING id)
	DELETE FROM webhook_attempts WHERE tenant_id = ? AND id = ?`, now, tenant, t.delivery.ID, uint32(t.delivery.Version), tenant, t.attempt.ID).Error
	if err != nil {
		return fmt.Errorf("give back the claim of delivery %s: %w", t.delivery.ID, err)
	}
	return nil
}
