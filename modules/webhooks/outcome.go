package webhooks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/internal/queries"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

// outcomeBatch is the most outcomes one statement commits.
const outcomeBatch = 256

// outcome is one send's result to commit: the delivery's new state, written only over the version
// the take returned, and its attempt row, closed either way.
type outcome struct {
	delivery *Delivery
	attempt  *Attempt
	failed   *messaging.Event // DeliveryFailed of the last failure: published only if the outcome wins
}

// committed is what became of an outcome: won is false when a redelivery changed the delivery
// during the send (the attempt is then superseded); health is the subscription's after the
// statement, zero when the statement left it alone (a success within a second of the last one).
type committed struct {
	won    bool
	health SubscriptionHealth
}

// writeOutcomes commits a batch of outcomes of concurrent sends, in one transaction with the
// DeliveryFailed events of those that announce a final failure.
func (s *Service) writeOutcomes(ctx context.Context, batch []outcome) ([]committed, error) {
	ctx = tenancy.System(ctx, "webhooks outcomes") // the batch spans tenants: every row names its own
	announces := slices.ContainsFunc(batch, func(o outcome) bool { return o.failed != nil })
	var out []committed
	err := s.batchWrite(ctx, announces, func(ctx context.Context) error {
		var err error
		if out, err = s.store.recordOutcomes(ctx, batch, s.now()); err != nil {
			return err
		}
		var events []messaging.Event
		for i, o := range batch {
			if o.failed != nil && out[i].won {
				events = append(events, *o.failed)
			}
		}
		if len(events) == 0 {
			return nil
		}
		return s.events.Publish(ctx, events...)
	})
	return out, err
}

// successRefresh is how old last_success_at may be before a success writes it again.
const successRefresh = time.Second

// healthChange is what a batch's outcomes do to one subscription's health, applied in their order:
// a success resets the failure run, a failure extends it.
type healthChange struct {
	sub          uuid.UUID
	succeeded    bool       // some outcome succeeded: the run restarts from the failures after the last success
	failed       bool       // some outcome failed: last_failure_at moves
	failures     int        // failures after the last success (or in all, without one)
	failingSince *time.Time // the start of the first of those failures
	hung         bool       // the last outcome timed out: the endpoint is held (breaker.go); any other ends a hold
}

func healthChanges(batch []outcome) []healthChange {
	bySub := map[uuid.UUID]*healthChange{}
	var order []uuid.UUID
	for _, o := range batch {
		sub := o.delivery.SubscriptionID
		c := bySub[sub]
		if c == nil {
			c = &healthChange{sub: sub}
			bySub[sub] = c
			order = append(order, sub)
		}
		c.hung = o.attempt.ErrorClass == errClassTimeout
		if o.attempt.Result == ResultSucceeded {
			c.succeeded, c.failures, c.failingSince = true, 0, nil
			continue
		}
		c.failed = true
		if c.failures == 0 {
			started := o.attempt.StartedAt
			c.failingSince = &started
		}
		c.failures++
	}
	// Rows are locked in subscription order, so two replicas' batches cannot deadlock on them.
	slices.SortFunc(order, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	out := make([]healthChange, len(order))
	for i, sub := range order {
		out[i] = *bySub[sub]
	}
	return out
}

// recordOutcomes writes a batch of outcomes in one statement: each delivery's new state only if the
// row still has the version its take returned (xmin), each attempt closed with its result, or as
// superseded when its delivery was changed meanwhile (a redelivery's attempt counts, not this one),
// and each subscription's health once for all its outcomes. A success refreshes last_success_at at
// most once a second per subscription unless it ends a run of failures, so a busy endpoint's
// successes do not all write its health row; nor do they lock it: a success on a row refreshed
// within the second is left out before the upsert (whose WHERE re-checks under the lock what that
// read without one), so the outcome batches of two replicas do not queue on a busy endpoint's row.
// Deliveries are locked in id order and health rows in subscription order, so concurrent batches
// wait for one another instead of deadlocking.
func (s store) recordOutcomes(ctx context.Context, batch []outcome, now time.Time) ([]committed, error) {
	n := len(batch)
	var (
		ids, tenants, statuses, triggers, claimedBy, lastErrors = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		claims                                                  = make([]*string, n)
		versions, attempts, rounds                              = make([]int64, n), make([]int64, n), make([]int64, n)
		nexts                                                   = make([]*time.Time, n)
		lastCodes                                               = make([]*int64, n)
		attemptIDs, results, classes, errs, excerpts, headers   = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		durations                                               = make([]int64, n)
		codes                                                   = make([]*int64, n)
	)
	for i, o := range batch {
		d, a := o.delivery, o.attempt
		ids[i], tenants[i], versions[i] = d.ID.String(), d.TenantID.String(), int64(uint32(d.Version))
		statuses[i], attempts[i], rounds[i], triggers[i] = string(d.Status), int64(d.AttemptCount), int64(d.RoundFailures), string(d.NextTrigger)
		nexts[i], claimedBy[i], lastErrors[i] = d.NextAttemptAt, d.ClaimedBy, d.LastError
		if d.ClaimID != nil {
			c := d.ClaimID.String()
			claims[i] = &c
		}
		if d.LastStatusCode != nil {
			c := int64(*d.LastStatusCode)
			lastCodes[i] = &c
		}
		h, err := a.ResponseHeaders.Value()
		if err != nil {
			return nil, err
		}
		attemptIDs[i], results[i], durations[i] = a.ID.String(), string(a.Result), int64(a.DurationMS)
		classes[i], errs[i], excerpts[i], headers[i] = a.ErrorClass, a.Error, a.ResponseExcerpt, h.(string)
		if a.StatusCode != nil {
			c := int64(*a.StatusCode)
			codes[i] = &c
		}
	}
	changes := healthChanges(batch)
	m := len(changes)
	subs, succeeded, failed, failures, since := make([]string, m), make([]bool, m), make([]bool, m), make([]int64, m), make([]*time.Time, m)
	hung := make([]bool, m)
	for i, c := range changes {
		subs[i], succeeded[i], failed[i], failures[i], since[i] = c.sub.String(), c.succeeded, c.failed, int64(c.failures), c.failingSince
		hung[i] = c.hung
	}
	q := queries.RecordOutcomes{IDs: ids, Tenants: tenants, Versions: versions, Statuses: statuses, Attempts: attempts, Rounds: rounds,
		Triggers: triggers, Nexts: nexts, Claims: claims, ClaimedBy: claimedBy, LastCodes: lastCodes, LastErrors: lastErrors,
		AttemptIDs: attemptIDs, Results: results, Durations: durations, Codes: codes, Classes: classes, Errors: errs,
		Excerpts: excerpts, Headers: headers, Subs: subs, Succeeded: succeeded, Failed: failed, Failures: failures, Since: since,
		Hung: hung, HoldUntil: now.Add(s.holdFor), HungSince: now.Add(-s.sendTimeout - successRefresh),
		Now: now, RefreshedAfter: now.Add(-successRefresh)}
	rows, err := s.conn(ctx).Raw(q.SQL(), q.Args()...).Rows()
	if err != nil {
		return nil, fmt.Errorf("record %d outcomes: %w", n, err)
	}
	defer rows.Close()
	byAttempt := make(map[uuid.UUID]committed, n)
	for rows.Next() {
		var (
			id     uuid.UUID
			result string
			c      committed
		)
		if err := rows.Scan(&id, &result, &c.health.FailingSince, &c.health.ConsecutiveFailures); err != nil {
			return nil, fmt.Errorf("record %d outcomes: %w", n, err)
		}
		c.won = result != string(ResultSuperseded)
		byAttempt[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("record %d outcomes: %w", n, err)
	}
	out := make([]committed, n)
	for i, o := range batch {
		c, ok := byAttempt[o.attempt.ID]
		if !ok {
			return nil, fmt.Errorf("record outcome of delivery %s: attempt %s not found", o.delivery.ID, o.attempt.ID)
		}
		c.health.SubscriptionID = o.delivery.SubscriptionID
		out[i] = c
	}
	return out, nil
}
