package webhooks

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/secrets"
	"github.com/keelson/keelson/platform/tenancy"
)

// AttemptResult is where an attempt stands.
type AttemptResult string

// Attempt results. An attempt is in_flight from the take to its outcome; superseded when a
// redelivery changed the delivery during the send (its outcome did not count); unknown when the
// replica sending it stopped before recording the outcome (closed by the delivery's next take).
const (
	ResultInFlight   AttemptResult = "in_flight"
	ResultSucceeded  AttemptResult = "succeeded"
	ResultFailed     AttemptResult = "failed"
	ResultSuperseded AttemptResult = "superseded"
	ResultUnknown    AttemptResult = "unknown"
)

// Attempt is one HTTP request sent for a delivery, recorded from the take on, whatever its outcome.
type Attempt struct {
	ID uuid.UUID `gorm:"column:id;primaryKey"`
	tenancy.Owned
	DeliveryID      uuid.UUID     `gorm:"column:delivery_id"`
	SubscriptionID  uuid.UUID     `gorm:"column:subscription_id"`
	Number          int           `gorm:"column:number"`
	Trigger         Trigger       `gorm:"column:trigger"`
	Result          AttemptResult `gorm:"column:result"`
	StartedAt       time.Time     `gorm:"column:started_at"`
	DurationMS      int           `gorm:"column:duration_ms"`
	StatusCode      *int          `gorm:"column:status_code"`
	ErrorClass      string        `gorm:"column:error_class"`
	Error           string        `gorm:"column:error"`
	ResponseExcerpt string        `gorm:"column:response_excerpt"`
	ResponseHeaders headerMap     `gorm:"column:response_headers"`
	Instance        string        `gorm:"column:instance"` // the replica that sent it
}

// TableName is the module's table.
func (Attempt) TableName() string { return "webhook_attempts" }

// handleDeliveryRequested attempts each claimed delivery a request names (DeliveriesRequested, or
// the single DeliveryRequested of earlier versions), all at once, each as if it were a message of its
// own (attemptRequested), and returns when all of them are done: the message is acknowledged after
// every outcome committed. If any of them failed, the message is handled again; the copies of the
// deliveries already attempted or put back are stale by then and send nothing.
func (s *Service) handleDeliveryRequested(ctx context.Context, e messaging.Event) error {
	var reqs []contract.DeliveryRequestedPayload
	if e.Type == contract.DeliveryRequested {
		var req contract.DeliveryRequestedPayload
		if err := e.Decode(&req); err != nil {
			return err
		}
		reqs = []contract.DeliveryRequestedPayload{req}
	} else {
		var p contract.DeliveriesRequestedPayload
		if err := e.Decode(&p); err != nil {
			return err
		}
		reqs = p.Deliveries
	}
	if len(reqs) == 1 {
		return s.attemptRequested(ctx, reqs[0])
	}
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Add(1)
		s.handlers.Go(func() {
			defer wg.Done()
			errs[i] = s.attemptRequested(ctx, req)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// attemptRequested attempts one claimed delivery in one of the replica's Concurrency handler places.
// It first TAKES the claim: one conditional UPDATE (store.takeClaims) marks the claim's attempt as
// started, opens its attempt row and reads what to send, so of all copies of one request, on any
// replica, at most one handler sends; a stale or duplicated copy, or one whose subscription is not
// active, matches no row and sends nothing (the delivery stays pending). The take restarts the lease
// (next_attempt_at = now + lease, and the send timeout is shorter) unless enough of it remains
// (keptLease), so the sweep cannot claim the row again while the send runs. A handler that dies after
// the take leaves the row pending and its attempt in_flight: the sweep claims it afresh after the
// lease, that new claim is sent once more and its take closes the old attempt as unknown — at least
// once overall, at most one send per claim. The outcome is committed with the xmin check against the
// take's version: if a redelivery changed the row meanwhile, this attempt is recorded as superseded
// and the redelivery's attempt counts.
//
// Before the take, the subscription's rate limit and the replica's send gate may make the request wait
// (attemptWithinLimits): then nothing is taken and no attempt is spent. A handler place is taken only
// once the gate admitted the send (attemptGated): requests the gate refuses, such as those of an
// endpoint that hangs, are put back without waiting for one, so they never queue before a healthy
// endpoint's request.
func (s *Service) attemptRequested(ctx context.Context, req contract.DeliveryRequestedPayload) error {
	if req.SubscriptionID == uuid.Nil {
		// A request published before requests named their subscription.
		sub, ok, err := s.store.subscriptionOf(ctx, req.DeliveryID)
		if err != nil {
			return err
		}
		if !ok {
			s.metrics.stale.Inc()
			return nil
		}
		req.SubscriptionID = sub
	}
	return s.attemptWithinLimits(ctx, req)
}

// attempt takes the claim, sends and records the outcome: take → send → complete. The take and the
// outcome each join a batch with those of the replica's concurrent handlers (Service.takes,
// Service.outcomes) and return once that batch committed.
func (s *Service) attempt(ctx context.Context, req contract.DeliveryRequestedPayload, pass *gatePass) error {
	attemptID, err := uuid.NewV7()
	if err != nil {
		return err
	}
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return err
	}
	seen := s.opened.forgetsSeen() // before the take reads the subscription
	took, err := s.takes.Do(ctx, takeRequest{DeliveryID: req.DeliveryID, Claim: req.ClaimID, Tenant: tenant, AttemptID: attemptID,
		SlotAt: req.RateSlotAt})
	t, ok := took.taken, took.ok
	if err != nil {
		return err
	}
	if !ok {
		s.metrics.stale.Inc()
		return nil
	}
	if slot := req.RateSlotAt; slot != nil {
		// Taken ahead of its slot: send at the slot, or not at all if the moment passed.
		select {
		case <-time.After(time.Until(*slot)):
		case <-ctx.Done():
		}
		if time.Now().After(slot.Add(rateTolerance)) || ctx.Err() != nil {
			s.metrics.putBack.WithLabelValues("rate_limit_late").Inc()
			return s.store.untake(ctx, t, s.now())
		}
	}
	ctx, span := s.startAttempt(ctx, t.delivery)
	res := s.send(ctx, t, seen, pass)
	endAttempt(span, res)
	if res.keyMissing {
		// This replica lacks a key: give the delivery back uncounted, for a replica holding it.
		s.log.ErrorContext(ctx, "cannot open a subscription's sealed values: delivery released", "delivery_id", t.delivery.ID, "error", res.Error)
		s.metrics.putBack.WithLabelValues("key_missing").Inc()
		return s.store.untake(ctx, t, s.now().Add(keyMissingBackoff))
	}
	s.metrics.observeAttempt(res)
	return s.recordOutcome(ctx, t, res)
}

// send makes the HTTP request of a taken delivery; a request that cannot even be built is a failed attempt.
// seen is the opened cache's forgetsSeen from before the take; the gate times the request on pass.
func (s *Service) send(ctx context.Context, t taken, seen uint64, pass *gatePass) sendResult {
	body, err := s.requestBody(t) // the event's, or the subscription's transformation of it (transform.go)
	if err != nil {
		return sendResult{ErrorClass: errClassRequest, Error: truncate(err.Error(), maxErrorLength)}
	}
	keys, headers, err := s.opened.of(t.sub, s.now(), s.sealer, seen)
	if err == nil {
		ctx, err = s.egressContext(ctx, t.sub) // the endpoint's proxy and client certificate (egress.go)
	}
	if err != nil {
		var missing *secrets.MissingKeyError
		return sendResult{ErrorClass: errClassRequest, Error: err.Error(), keyMissing: errors.As(err, &missing)}
	}
	s.gate.sending(pass)
	started := s.now()
	hung := func() { s.holdHanging(ctx, t.sub.ID, started) }
	res := s.sender.send(ctx, outgoing{URL: t.sub.URL, MessageID: t.event.ID, Body: body, Keys: keys, Headers: headers, Hung: hung})
	s.gate.sent(pass, res.Duration)
	return res
}

// writeTakes takes a batch of claims (store.takeClaims) with this replica's lease and instance.
func (s *Service) writeTakes(ctx context.Context, reqs []takeRequest) ([]takeResult, error) {
	ctx = tenancy.System(ctx, "webhooks takes") // the batch spans tenants: every request names its own
	// Bounded before now is read, so the leases counted from now still cover the send that follows.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.takeWriteBound())
	defer cancel()
	now := s.now()
	// One threshold for the batch, counted from the latest send slot any of its requests waits for.
	start := now
	for _, r := range reqs {
		if r.SlotAt != nil && r.SlotAt.After(start) {
			start = *r.SlotAt
		}
	}
	terms := takeTerms{Now: now, LeaseUntil: now.Add(s.cfg.ClaimLease),
		KeepLeaseFrom: start.Add(keptLease(s.cfg.ClaimLease, s.cfg.SendTimeout, s.cfg.takeWriteBound())),
		Instance:      s.instance, AbandonedBefore: now.Add(-s.cfg.SendTimeout)}
	var out []takeResult
	err := s.batchWrite(ctx, false, func(ctx context.Context) error {
		var err error
		out, err = s.store.takeClaims(ctx, terms, reqs)
		return err
	})
	return out, err
}

// batchWrite runs the write of a batch on generic plans (database.WithGenericPlans), in a unit of
// work if needsTx: the take and outcome statements are the same for any batch size, and planning
// them afresh would cost more than running them.
func (s *Service) batchWrite(ctx context.Context, needsTx bool, fn func(ctx context.Context) error) error {
	return s.db.WithGenericPlans(ctx, func(ctx context.Context) error {
		if needsTx {
			return s.db.WithTx(ctx, fn)
		}
		return fn(ctx)
	})
}

// recordOutcome stores the delivery's new state, closes the attempt and updates the subscription's
// health atomically, with the xmin check, in a batch with the outcomes of concurrent sends
// (store.recordOutcomes), and waits for that batch to commit; then applies what the outcome says about the endpoint:
// 410 disables it at once, a long run of failures disables it (Config.DisableAfter).
func (s *Service) recordOutcome(ctx context.Context, t taken, res sendResult) error {
	d, attempt := t.delivery, t.attempt
	attempt.DurationMS = int(res.Duration.Milliseconds())
	attempt.ErrorClass, attempt.Error, attempt.ResponseExcerpt, attempt.ResponseHeaders = res.ErrorClass, res.Error, res.Excerpt, res.Headers
	if res.StatusCode != 0 {
		code := res.StatusCode
		attempt.StatusCode = &code
	}
	now := s.now()
	label, final := "succeeded", false
	if res.Succeeded() {
		attempt.Result = ResultSucceeded
		d.MarkSucceeded(now, res.StatusCode)
	} else {
		attempt.Result = ResultFailed
		final = d.MarkFailedRetryingAfter(now, res.StatusCode, res.ErrorClass+": "+res.Error, s.cfg.RetrySchedule, s.jitter,
			min(res.RetryAfter, s.cfg.RetryAfterMax))
		label = "retrying"
		if final {
			label = "failed"
		}
		s.log.WarnContext(ctx, "webhook attempt failed", "delivery_id", d.ID, "subscription_id", d.SubscriptionID,
			"attempt", attempt.Number, "error_class", res.ErrorClass, "status_code", res.StatusCode, "error", res.Error)
	}
	o := outcome{delivery: d, attempt: attempt}
	if final {
		// The last failure also announces itself: outcome and event commit together.
		failed, err := s.deliveryFailed(ctx, d)
		if err != nil {
			return err
		}
		o.failed = &failed
	}
	c, err := s.outcomes.Do(ctx, o)
	if err != nil {
		return err
	}
	won, health := c.won, c.health
	if !won {
		s.log.InfoContext(ctx, "delivery changed while it was being sent (redelivered): attempt superseded",
			"delivery_id", d.ID, "attempt", attempt.Number)
		label = "dropped"
	}
	s.metrics.outcome(label)
	switch {
	case res.Gone():
		return s.disableSubscription(ctx, d.SubscriptionID, ReasonGone, nil)
	case !res.Succeeded() && health.shouldDisable(now, s.cfg.DisableAfter, s.cfg.DisableMinAttempts):
		return s.disableSubscription(ctx, d.SubscriptionID, ReasonFailing, func(h SubscriptionHealth) bool {
			return h.shouldDisable(s.now(), s.cfg.DisableAfter, s.cfg.DisableMinAttempts)
		})
	}
	return nil
}

// deliveryFailed is the event telling other modules a delivery exhausted its schedule.
// Its tenant is the handler's, which the take matched against the delivery's row.
func (s *Service) deliveryFailed(ctx context.Context, d *Delivery) (messaging.Event, error) {
	return messaging.NewEvent(ctx, contract.Source, contract.DeliveryFailed, contract.DeliveryFailedPayload{
		DeliveryID: d.ID, SubscriptionID: d.SubscriptionID, EventID: d.EventID, EventType: d.EventType,
		AttemptCount: d.AttemptCount, LastStatusCode: d.LastStatusCode, LastError: d.LastError,
	})
}

// headerMap is a small string map stored as a jsonb object.
type headerMap map[string]string

// Value stores the map as jsonb.
func (h headerMap) Value() (driver.Value, error) {
	if h == nil {
		return "{}", nil
	}
	b, err := json.Marshal(map[string]string(h))
	return string(b), err
}

// Scan reads the jsonb object.
func (h *headerMap) Scan(src any) error {
	return scanJSONB(src, (*map[string]string)(h), "headers")
}
