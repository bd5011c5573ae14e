package webhooks

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/keelson/keelson/platform/concurrency"
)

// The claim rules live in one place: the statements that take claims (store.takeClaims) and record
// outcomes (store.recordOutcomes). These tables are their specification; every case runs through
// those statements against PostgreSQL, so a rule written down here is a rule production follows.

// claimRow is one delivery set up for a case: its own subscription, born claimed by the fan-out.
type claimRow struct {
	id, sub, claim uuid.UUID
}

func newClaimRow(t *testing.T, h *harness, n int) claimRow {
	t.Helper()
	eventType := fmt.Sprintf("rules.case%d", n)
	subID, _ := h.subscribe("http://127.0.0.1:9/", eventType)
	_, err := h.svc.PublishEvent(tenantContext(), EventInput{Type: eventType, Data: []byte(`{}`)})
	require.NoError(t, err)
	var r claimRow
	require.NoError(t, h.db.SQL().QueryRow(`SELECT id, claim_id FROM webhook_deliveries WHERE subscription_id = $1`, subID).
		Scan(&r.id, &r.claim))
	r.sub = uuid.MustParse(subID)
	return r
}

func (r claimRow) exec(t *testing.T, h *harness, query string, args ...any) {
	t.Helper()
	_, err := h.db.SQL().Exec(query, append([]any{r.id, r.sub}, args...)...)
	require.NoError(t, err)
}

// takeTermsAt are the terms a consumer takes with at now: the test config's lease, kept when enough is left.
func takeTermsAt(now time.Time) takeTerms {
	cfg := testConfig()
	return takeTerms{Now: now, LeaseUntil: now.Add(cfg.ClaimLease),
		KeepLeaseFrom: now.Add(keptLease(cfg.ClaimLease, cfg.SendTimeout, cfg.takeWriteBound())),
		Instance:      "rules", AbandonedBefore: now.Add(-time.Minute)}
}

func TestTheTakeStatementFollowsTheClaimRules(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	ctx := tenantContext()
	other := uuid.New()
	cases := []struct {
		name    string
		arrange func(t *testing.T, r claimRow) (request uuid.UUID) // puts the row in the case's state; the claim the request carries
		taken   bool
	}{
		{"a fresh claim is taken", func(_ *testing.T, r claimRow) uuid.UUID { return r.claim }, true},
		{"a claim whose lease expired, not claimed again, is still taken", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_deliveries SET next_attempt_at = now() - interval '1 minute' WHERE id = $1 AND subscription_id = $2`)
			return r.claim
		}, true},
		{"a claim the sweep replaced after its lease expired is stale", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_deliveries SET claim_id = $3 WHERE id = $1 AND subscription_id = $2`, other)
			return r.claim
		}, false},
		{"the sweep's new claim is taken", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_deliveries SET claim_id = $3 WHERE id = $1 AND subscription_id = $2`, other)
			return other
		}, true},
		{"another owner's claim is refused", func(*testing.T, claimRow) uuid.UUID { return uuid.New() }, false},
		{"a second copy of a taken claim is refused", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_deliveries SET sent_claim_id = claim_id WHERE id = $1 AND subscription_id = $2`)
			return r.claim
		}, false},
		{"a redelivery's claim is taken after the old one was", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_deliveries SET sent_claim_id = claim_id, claim_id = $3, next_trigger = 'redeliver'
				WHERE id = $1 AND subscription_id = $2`, other)
			return other
		}, true},
		{"the claim a redelivery replaced is refused", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_deliveries SET claim_id = $3, next_trigger = 'redeliver' WHERE id = $1 AND subscription_id = $2`, other)
			return r.claim
		}, false},
		{"a succeeded delivery is refused", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_deliveries SET status = 'succeeded' WHERE id = $1 AND subscription_id = $2`)
			return r.claim
		}, false},
		{"a failed delivery is refused", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_deliveries SET status = 'failed' WHERE id = $1 AND subscription_id = $2`)
			return r.claim
		}, false},
		{"a paused subscription's claim waits", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_subscriptions SET status = 'paused' WHERE $1::uuid IS NOT NULL AND id = $2`)
			return r.claim
		}, false},
		{"a deleted subscription's claim is refused", func(t *testing.T, r claimRow) uuid.UUID {
			r.exec(t, h, `UPDATE webhook_subscriptions SET deleted_at = now() WHERE $1::uuid IS NOT NULL AND id = $2`)
			return r.claim
		}, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newClaimRow(t, h, i)
			request := c.arrange(t, r)
			before, err := h.svc.store.delivery(ctx, r.id)
			require.NoError(t, err)
			attempt := uuid.New()
			tk, ok, err := h.svc.store.takeClaim(ctx, takeRequest{DeliveryID: r.id, Claim: request, AttemptID: attempt}, takeTermsAt(time.Now()))
			require.NoError(t, err)
			require.Equal(t, c.taken, ok)
			after, err := h.svc.store.delivery(ctx, r.id)
			require.NoError(t, err)
			var attempts int
			require.NoError(t, h.db.SQL().QueryRow(`SELECT count(*) FROM webhook_attempts WHERE id = $1`, attempt).Scan(&attempts))
			if !ok {
				require.Equal(t, before.Version, after.Version, "a refused take writes nothing")
				require.Zero(t, attempts)
				return
			}
			require.Equal(t, request, *after.SentClaimID, "the claim is marked taken")
			require.Equal(t, request, *after.ClaimID, "and kept: the lease still guards the row")
			require.Equal(t, before.AttemptCount+1, after.AttemptCount)
			require.Equal(t, after.Version, tk.delivery.Version, "the outcome is checked against this version")
			require.Equal(t, 1, attempts, "the attempt is opened in_flight")
			require.Equal(t, ResultInFlight, tk.attempt.Result)
		})
	}
}

func TestTheOutcomeStatementFollowsTheClaimRules(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	ctx := tenantContext()
	cases := []struct {
		name    string
		between func(t *testing.T, r claimRow) // what happens to the row while the send runs
		won     bool
	}{
		{"an outcome over the version its take returned is recorded", func(*testing.T, claimRow) {}, true},
		{"an outcome after a redelivery is superseded", func(t *testing.T, r claimRow) {
			_, err := h.svc.Redeliver(ctx, r.id, concurrency.Precondition{})
			require.NoError(t, err)
		}, false},
		{"an outcome after the sweep claimed the row again (stale xmin) is superseded", func(t *testing.T, r claimRow) {
			r.exec(t, h, `UPDATE webhook_deliveries SET claim_id = $3 WHERE id = $1 AND subscription_id = $2`, uuid.New())
		}, false},
		{"an outcome after any write to the row is superseded", func(t *testing.T, r claimRow) {
			r.exec(t, h, `UPDATE webhook_deliveries SET updated_at = updated_at WHERE id = $1 AND subscription_id = $2`)
		}, false},
	}
	for i, c := range cases {
		for _, succeeded := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s (succeeded %v)", c.name, succeeded), func(t *testing.T) {
				r := newClaimRow(t, h, 100+2*i+map[bool]int{true: 0, false: 1}[succeeded])
				tk, ok, err := h.svc.store.takeClaim(ctx, takeRequest{DeliveryID: r.id, Claim: r.claim, AttemptID: uuid.New()}, takeTermsAt(time.Now()))
				require.NoError(t, err)
				require.True(t, ok)
				c.between(t, r)
				before, err := h.svc.store.delivery(ctx, r.id)
				require.NoError(t, err)

				now := time.Now()
				if succeeded {
					tk.attempt.Result = ResultSucceeded
					tk.delivery.MarkSucceeded(now, 204)
				} else {
					tk.attempt.Result = ResultFailed
					tk.delivery.MarkFailedRetryingAfter(now, 500, "http_status: 500", testConfig().RetrySchedule, noJitter, 0)
				}
				var out []committed
				require.NoError(t, h.db.WithTx(ctx, func(ctx context.Context) error {
					out, err = h.svc.store.recordOutcomes(ctx, []outcome{{delivery: tk.delivery, attempt: tk.attempt}}, now)
					return err
				}))
				require.Equal(t, c.won, out[0].won)

				after, err := h.svc.store.delivery(ctx, r.id)
				require.NoError(t, err)
				var result string
				require.NoError(t, h.db.SQL().QueryRow(`SELECT result FROM webhook_attempts WHERE id = $1`, tk.attempt.ID).Scan(&result))
				if !c.won {
					require.Equal(t, before.Version, after.Version, "the delivery is left to whoever changed it")
					require.Equal(t, string(ResultSuperseded), result)
					return
				}
				require.Equal(t, string(tk.attempt.Result), result)
				require.Nil(t, after.ClaimID, "the claim ends with the outcome")
				if succeeded {
					require.Equal(t, StatusSucceeded, after.Status)
				} else {
					require.Equal(t, StatusPending, after.Status)
					require.Equal(t, 1, after.RoundFailures)
				}
			})
		}
	}
}

// A sweep claims its whole batch in one transaction: one conflict anywhere in it rolls back every
// claim and every request of the batch, and the next sweep takes them all.
func TestASweepWithAConflictInTheMiddleOfItsBatchRollsTheWholeBatchBack(t *testing.T) {
	sweeper := newHarness(t, testConfig(), harnessOptions{})
	other := newHarness(t, testConfig(), harnessOptions{database: sweeper.database})
	sweeper.subscribe("http://127.0.0.1:9/", "*")
	const rows = 5
	ids := make([]uuid.UUID, rows)
	for i := range ids {
		ids[i] = sweeper.dueDelivery("sweep.batch")
	}
	ctx := tenantContext()
	claimsBefore := map[uuid.UUID]uuid.UUID{}
	for _, id := range ids {
		d, err := sweeper.svc.store.delivery(ctx, id)
		require.NoError(t, err)
		claimsBefore[id] = *d.ClaimID
	}
	requestsBefore := len(sweeper.deliveryRequests())

	// The third save of the batch finds its row changed by another replica since the sweep read it.
	var saves atomic.Int32
	var changed uuid.UUID
	require.NoError(t, sweeper.db.Gorm().Callback().Update().Before("gorm:update").Register("test:conflict_third", func(tx *gorm.DB) {
		d, ok := tx.Statement.Dest.(*Delivery)
		if !ok || saves.Add(1) != 3 {
			return
		}
		changed = d.ID
		_, err := other.db.SQL().Exec(`UPDATE webhook_deliveries SET updated_at = now() WHERE id = $1`, d.ID)
		require.NoError(t, err)
	}))
	require.NoError(t, sweeper.svc.Sweep(ctx), "a lost race is not an error")
	require.EqualValues(t, 3, saves.Load(), "the batch stopped at the conflict")
	require.NotEqual(t, uuid.Nil, changed)

	for _, id := range ids {
		d, err := sweeper.svc.store.delivery(ctx, id)
		require.NoError(t, err)
		require.Equal(t, claimsBefore[id], *d.ClaimID, "no claim of the batch survives, before or after the conflict")
	}
	require.Len(t, sweeper.deliveryRequests(), requestsBefore, "no request of the batch was published")

	require.NoError(t, sweeper.db.Gorm().Callback().Update().Remove("test:conflict_third"))
	require.NoError(t, sweeper.svc.Sweep(ctx))
	requested := map[uuid.UUID]bool{}
	for _, r := range sweeper.deliveryRequests()[requestsBefore:] {
		requested[r.DeliveryID] = true
	}
	for _, id := range ids {
		d, err := sweeper.svc.store.delivery(ctx, id)
		require.NoError(t, err)
		require.NotEqual(t, claimsBefore[id], *d.ClaimID, "the next sweep claims every row")
		require.True(t, requested[id])
	}
}
