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

	"github.com/keelson/keelson/modules/webhooks/internal/queries"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/tenancy"
)

// store is the module's data access; every call runs in the unit of work carried by ctx, if any.
type store struct {
	db          *database.DB
	holdFor     time.Duration // Config.HoldFor: how long a timeout holds an endpoint
	sendTimeout time.Duration // Config.SendTimeout
}

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

// takeBatch is the most claims one statement takes.
const takeBatch = 256

// takeRequest is what the consumer asks of store.takeClaims: one copy of a DeliveryRequested.
type takeRequest struct {
	DeliveryID, Claim uuid.UUID
	Tenant            uuid.UUID  // the request's
	AttemptID         uuid.UUID  // the attempt row opened by the take
	SlotAt            *time.Time // the reserved send slot the handler waits for after the take, if any
}

// takeTerms are what a batch of takes shares: when it is taken, by whom, and for how long.
type takeTerms struct {
	Now             time.Time
	LeaseUntil      time.Time // the take restarts the lease for the send...
	KeepLeaseFrom   time.Time // ...unless it already runs until this time or later
	Instance        string
	AbandonedBefore time.Time // in_flight attempts of the delivery started before this are closed as unknown
}

// taken is a delivery whose claim was taken, with what sending it needs.
type taken struct {
	delivery *Delivery
	sub      *Subscription
	event    *eventRecord
	body     requestBody // the event's, built once for all its deliveries in the batch
	attempt  *Attempt    // in_flight
}

// requestBody is an event's request body (eventRecord.body), or why it could not be built.
type requestBody struct {
	bytes []byte
	err   error
}

// takeResult is what became of one takeRequest: ok is false when nothing was taken.
type takeResult struct {
	taken
	ok bool
}

// takeClaims takes a batch of (delivery, claim) pairs in one statement: a pair is taken only while its
// delivery is pending under that claim and no attempt was started under it (one claim sends once); the
// take marks the claim sent, counts the attempt and restarts the lease unless enough of it is left
// (keptLease). claim_rules_test.go states these rules case by case. It opens each taken attempt and
// closes abandoned ones, and returns what to send: the consumer's only read, on the batch's terms;
// each delivery comes at most once.
//
// The subscription must be active; its row is read under FOR KEY SHARE, which a status change's
// FOR UPDATE waits for (and which waits for it, then re-reads the new status): once a pause commits,
// no take can still see the subscription active. The deliveries are then locked in id order, so
// batches of two replicas sharing rows wait for one another rather than deadlock; of two handlers of
// the same claim, on any replicas, the row lock lets one through and the other re-checks the
// committed row, matches nothing and gets ok = false, as does a stale claim, while the other pairs
// of its batch are taken. The returned version is what the outcome's xmin check compares against.
func (s store) takeClaims(ctx context.Context, terms takeTerms, reqs []takeRequest) ([]takeResult, error) {
	n := len(reqs)
	if n == 0 {
		return nil, nil
	}
	ids, tenants, claims, attempts := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	slots := make([]*time.Time, n)
	for i, r := range reqs {
		ids[i], tenants[i], claims[i], attempts[i] = r.DeliveryID.String(), r.Tenant.String(), r.Claim.String(), r.AttemptID.String()
		slots[i] = r.SlotAt
	}
	q := queries.TakeClaims{IDs: ids, Tenants: tenants, Claims: claims, Attempts: attempts, Slots: slots,
		Now: terms.Now, LeaseUntil: terms.LeaseUntil, KeepLeaseFrom: terms.KeepLeaseFrom, AbandonedBefore: terms.AbandonedBefore,
		Instance: terms.Instance, Pending: string(StatusPending)}
	rows, err := s.conn(ctx).Raw(q.SQL(), q.Args()...).Rows()
	if err != nil {
		return nil, fmt.Errorf("take %d claims: %w", n, err)
	}
	defer rows.Close()
	byDelivery := make(map[uuid.UUID]taken, n)
	bodies := make(map[eventKey]requestBody)
	for rows.Next() {
		d, sub, ev := &Delivery{}, &Subscription{}, &eventRecord{}
		var (
			attemptID uuid.UUID
			started   time.Time
		)
		if err := rows.Scan(&d.ID, &d.TenantID, &d.SubscriptionID, &d.EventID, &d.EventType, &d.Status, &d.AttemptCount,
			&d.RoundFailures, &d.NextTrigger, &d.NextAttemptAt, &d.ClaimID, &d.SentClaimID, &d.ClaimedBy,
			&d.LastStatusCode, &d.LastError, &d.CreatedAt, &d.UpdatedAt, &d.Version, &attemptID, &started,
			&sub.URL, &sub.Secret, &sub.PreviousSecrets, &sub.Headers, &sub.Version,
			&sub.ProxyURL, &sub.TLSClientCertificate, &sub.TLSClientKey, &sub.TLSCABundle, &sub.Transform,
			&ev.Type, &ev.Data, &ev.CreatedAt); err != nil {
			return nil, fmt.Errorf("take %d claims: %w", n, err)
		}
		sub.ID, sub.Status, ev.ID = d.SubscriptionID, StatusActive, d.EventID
		sub.TenantID, ev.TenantID = d.TenantID, d.TenantID
		a := &Attempt{ID: attemptID, Owned: tenancy.Owned{TenantID: d.TenantID}, DeliveryID: d.ID, SubscriptionID: d.SubscriptionID,
			Number: d.AttemptCount, Trigger: d.NextTrigger, StartedAt: started.UTC(), Result: ResultInFlight, Instance: terms.Instance}
		body, built := bodies[eventKey{d.TenantID, ev.ID}]
		if !built {
			body.bytes, body.err = ev.body()
			bodies[eventKey{d.TenantID, ev.ID}] = body
		}
		byDelivery[d.ID] = taken{delivery: d, sub: sub, event: ev, body: body, attempt: a}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("take %d claims: %w", n, err)
	}
	out := make([]takeResult, n)
	for i, r := range reqs {
		if t, ok := byDelivery[r.DeliveryID]; ok && t.attempt.ID == r.AttemptID {
			out[i] = takeResult{taken: t, ok: true}
		}
	}
	return out, nil
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

// fanOutTarget is what the fan-out reads of a subscription.
type fanOutTarget struct {
	id         uuid.UUID
	eventTypes patternSet
	filter     string // a CEL expression the event must satisfy; "" = none
	failing    bool   // queries.FailingHealth, or held (breaker.go): its new deliveries wait for the sweep
}

// succeededHealth says, of a subscription's health row h, that its last attempt, on any replica,
// succeeded: the send gate lets such an endpoint probe beyond the quarter kept for probes.
const succeededHealth = "coalesce(h.last_success_at IS NOT NULL AND h.failing_since IS NULL, false)"

// fanOutTargets are the subscriptions of tenants that events fan out to, by tenant: active and paused
// ones (Subscription.receivesEvents). Every event reads them, so only the columns it needs.
func (s store) fanOutTargets(ctx context.Context, tenants []uuid.UUID) (map[uuid.UUID][]fanOutTarget, error) {
	ids := make([]string, len(tenants))
	for i, t := range tenants {
		ids[i] = t.String()
	}
	q := queries.FanOutTargets{Tenants: ids, Disabled: string(StatusDisabled)}
	rows, err := s.conn(ctx).Raw(q.SQL(), q.Args()...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[uuid.UUID][]fanOutTarget, len(tenants))
	for rows.Next() {
		var tenant uuid.UUID
		var t fanOutTarget
		if err := rows.Scan(&tenant, &t.id, &t.eventTypes, &t.filter, &t.failing); err != nil {
			return nil, err
		}
		out[tenant] = append(out[tenant], t)
	}
	return out, rows.Err()
}

// saveSubscription writes a loaded subscription with the xmin check.
func (s store) saveSubscription(ctx context.Context, sub *Subscription) error {
	return s.conn(ctx).Save(sub).Error
}

// eventKey names a stored event: its id is unique within its tenant.
type eventKey struct {
	tenant uuid.UUID
	id     string
}

// insertEvents stores, in one statement whatever their number, the events whose key is new, and
// says which they were; a duplicate stays as first stored. The rows go in key order, so two units
// of work inserting the same events wait for one another rather than deadlock.
func (s store) insertEvents(ctx context.Context, evs []*eventRecord) (map[eventKey]bool, error) {
	n := len(evs)
	ids, tenants, types, data, ats := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]time.Time, n)
	for i, e := range evs {
		ids[i], tenants[i], types[i], data[i], ats[i] = e.ID, e.TenantID.String(), e.Type, string(e.Data), e.CreatedAt
	}
	q := queries.InsertEvents{IDs: ids, Tenants: tenants, Types: types, Data: data, At: ats}
	rows, err := s.conn(ctx).Raw(q.SQL(), q.Args()...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	stored := make(map[eventKey]bool, n)
	for rows.Next() {
		var k eventKey
		if err := rows.Scan(&k.tenant, &k.id); err != nil {
			return nil, err
		}
		stored[k] = true
	}
	return stored, rows.Err()
}

func (s store) event(ctx context.Context, id string) (*eventRecord, error) {
	var ev eventRecord
	if err := s.conn(ctx).Where("id = ?", id).Take(&ev).Error; err != nil {
		return nil, notFound(err, "event", id)
	}
	return &ev, nil
}

// transformOf is a subscription's transformation, deleted or not ("" = none).
func (s store) transformOf(ctx context.Context, id uuid.UUID) (string, error) {
	var transform string
	err := s.conn(ctx).Raw(`SELECT transform FROM webhook_subscriptions WHERE id = ?`, id).Row().Scan(&transform)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return transform, err
}

func (s store) countDeliveries(ctx context.Context, eventID string) (int, error) {
	var n int64
	err := s.conn(ctx).Model(&Delivery{}).Where("event_id = ?", eventID).Count(&n).Error
	return int(n), err
}

// createDeliveries inserts the deliveries of a fan-out (newDelivery: pending, claimed, same times;
// newWaitingDelivery: pending, unclaimed, due at their creation), of one event or of several, with one
// statement whose text is the same for any number of them: the columns they share are single
// parameters, the others arrays; no RETURNING, and no reflection over the rows. A delivery without a
// tenant belongs to the tenant of ctx.
func (s store) createDeliveries(ctx context.Context, ds []*Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	first := ds[0]
	lease, holder := first.CreatedAt, "" // of the claimed rows: all share them
	for _, d := range ds {
		if d.ClaimID != nil && d.NextAttemptAt != nil {
			lease, holder = *d.NextAttemptAt, d.ClaimedBy
			break
		}
	}
	n := len(ds)
	ids, tenants, subs, events, types, claims := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, d := range ds {
		due, by := lease, holder
		if d.ClaimID == nil {
			due, by = d.CreatedAt, ""
		}
		if !d.CreatedAt.Equal(first.CreatedAt) || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(due) || d.ClaimedBy != by {
			return fmt.Errorf("delivery %s is not of the fan-out of delivery %s", d.ID, first.ID)
		}
		if d.TenantID == uuid.Nil {
			tenant, err := tenancy.Require(ctx)
			if err != nil {
				return err
			}
			d.TenantID = tenant
		}
		ids[i], tenants[i], subs[i] = d.ID.String(), d.TenantID.String(), d.SubscriptionID.String()
		if d.ClaimID != nil {
			claims[i] = d.ClaimID.String()
		}
		events[i], types[i] = d.EventID, d.EventType
	}
	q := queries.CreateDeliveries{Status: string(StatusPending), Trigger: string(TriggerScheduled), Lease: lease, By: holder,
		At: first.CreatedAt, IDs: ids, Tenants: tenants, Subs: subs, Events: events, Types: types, Claims: claims}
	return s.conn(ctx).Exec(q.SQL(), q.Args()...).Error
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

// dueDeliveries are pending rows of active subscriptions whose next attempt (or expired lease) is
// due, taken round-robin across subscriptions: each one's oldest due first, then each one's second,
// and so on, so one endpoint's backlog cannot fill the batch while another's retries wait; at most
// perSubscription of a failing one, so a healthy endpoint's backlog (requests the send gate put back
// in a burst) drains at the batch's pace, not a tenth of it. A failing subscription (queries.FailingHealth) gets its first turn with the others
// and its further turns after every healthy one's: endpoints that hang keep many deliveries due (put
// back by the send gate, or new), and those must not crowd a healthy endpoint's out of the batch.
// Paused and disabled subscriptions, and disabled tenants, are skipped: their deliveries wait,
// pending, with no attempt spent; so are held endpoints (breaker.go) until their hold passes, and
// then only their oldest due delivery is taken, the probe (holdProbes).
func (s store) dueDeliveries(ctx context.Context, now time.Time, limit, perSubscription int) ([]*Delivery, error) {
	var ds []*Delivery
	q := queries.DueDeliveries{Pending: string(StatusPending), Active: string(StatusActive), Now: now, PerSubscription: perSubscription, Limit: limit}
	err := s.conn(ctx).Raw(q.SQL(), q.Args()...).Scan(&ds).Error
	return ds, err
}

// countDue counts the due pending deliveries of active subscriptions of enabled tenants (what the
// sweep would claim: the backlog gauge), one subscription at a time through the (subscription_id, next_attempt_at) index the sweep
// reads too: no index of its own for every delivery write to keep up.
func (s store) countDue(ctx context.Context, now time.Time) (int, error) {
	var n int64
	q := queries.CountDue{Pending: string(StatusPending), Active: string(StatusActive), Now: now}
	err := s.conn(ctx).Raw(q.SQL(), q.Args()...).Scan(&n).Error
	return int(n), err
}

// subscriptionForUpdate loads a live subscription and locks its row until the transaction ends.
func (s store) subscriptionForUpdate(ctx context.Context, id uuid.UUID) (*Subscription, error) {
	var sub Subscription
	err := s.conn(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ? AND deleted_at IS NULL", id).Take(&sub).Error
	if err != nil {
		return nil, notFound(err, "subscription", id)
	}
	return &sub, nil
}

// createHealth gives a new subscription its health row.
func (s store) createHealth(ctx context.Context, id uuid.UUID) error {
	return s.conn(ctx).Create(&SubscriptionHealth{SubscriptionID: id}).Error
}

func (s store) health(ctx context.Context, id uuid.UUID) (SubscriptionHealth, error) {
	h := SubscriptionHealth{SubscriptionID: id}
	err := s.conn(ctx).Where("subscription_id = ?", id).Take(&h).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return h, nil
	}
	return h, err
}

func (s store) healthOf(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]SubscriptionHealth, error) {
	var hs []SubscriptionHealth
	if err := s.conn(ctx).Where("subscription_id IN ?", ids).Find(&hs).Error; err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]SubscriptionHealth, len(hs))
	for _, h := range hs {
		out[h.SubscriptionID] = h
	}
	return out, nil
}

// resetHealth starts the failure count afresh (on resume): the auto-disable rule then needs a new run.
func (s store) resetHealth(ctx context.Context, id uuid.UUID) error {
	return s.conn(ctx).Exec(`UPDATE webhook_subscription_health SET consecutive_failures = 0, failing_since = NULL
		WHERE subscription_id = ?`, id).Error
}

// releaseWaiting makes due now the pending deliveries of a subscription whose claims were issued but
// not taken (their requests arrived while it was not active and sent nothing); retries keep their time.
func (s store) releaseWaiting(ctx context.Context, subID uuid.UUID, now time.Time) error {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return err
	}
	return s.conn(ctx).Exec(`UPDATE webhook_deliveries SET next_attempt_at = ?
		WHERE tenant_id = ? AND subscription_id = ? AND status = ? AND claim_id IS NOT NULL AND sent_claim_id IS DISTINCT FROM claim_id
			AND next_attempt_at > ?`, now, tenant, subID, StatusPending, now).Error
}

// cancelPending fails every pending delivery of a subscription (on delete) and returns how many.
// A send in flight then finds its outcome superseded.
func (s store) cancelPending(ctx context.Context, subID uuid.UUID, now time.Time, reason string) (int, error) {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return 0, err
	}
	res := s.conn(ctx).Exec(`UPDATE webhook_deliveries SET status = ?, claim_id = NULL, claimed_by = '', next_attempt_at = NULL,
		last_error = ?, updated_at = ? WHERE tenant_id = ? AND subscription_id = ? AND status = ?`,
		StatusFailed, reason, now, tenant, subID, StatusPending)
	return int(res.RowsAffected), res.Error
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
