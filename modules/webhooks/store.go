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
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/tenancy"
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

// takeClaims applies Delivery.CanStartAttempt and StartAttempt to a batch of (delivery, claim) pairs in
// one statement, opening each taken attempt and closing abandoned ones, and returns what to send: the
// consumer's only read, on the batch's terms; each delivery comes at most once.
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
	rows, err := s.conn(ctx).Raw(`WITH r AS (
		SELECT * FROM unnest(CAST(@ids AS text[])::uuid[], CAST(@tenants AS text[])::uuid[], CAST(@claims AS text[])::uuid[],
			CAST(@attempts AS text[])::uuid[], CAST(@slots AS timestamptz[])) AS r(id, tenant, claim, attempt, slot)),
	sub AS (
		SELECT s.id, s.url, s.secret, s.previous_secrets, s.headers, s.xmin,
			s.proxy_url, s.tls_client_certificate, s.tls_client_key, s.tls_ca_bundle, s.transform
		FROM webhook_subscriptions s
		WHERE s.id IN (SELECT d0.subscription_id FROM r JOIN webhook_deliveries d0 ON d0.id = r.id AND d0.tenant_id = r.tenant)
			AND s.status = 'active' AND s.deleted_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = s.tenant_id AND t.disabled_at IS NOT NULL)
		ORDER BY s.id FOR KEY SHARE OF s),
	locked AS (
		SELECT d.id, r.attempt, greatest(CAST(@now AS timestamptz), r.slot) AS started
		FROM webhook_deliveries d JOIN r ON r.id = d.id AND r.tenant = d.tenant_id
		WHERE d.subscription_id IN (SELECT id FROM sub) AND d.status = @pending AND d.claim_id = r.claim
			AND d.sent_claim_id IS DISTINCT FROM d.claim_id
		ORDER BY d.id FOR UPDATE OF d),
	taken AS (
		UPDATE webhook_deliveries d SET sent_claim_id = claim_id,
			next_attempt_at = CASE WHEN d.next_attempt_at >= @keep THEN d.next_attempt_at ELSE @lease END,
			attempt_count = attempt_count + 1, claimed_by = @instance, rate_slot_at = NULL
		FROM locked l
		WHERE d.id = l.id
		RETURNING d.id, d.tenant_id, d.subscription_id, d.event_id, d.event_type, d.status, d.attempt_count, d.round_failures,
			d.next_trigger, d.next_attempt_at, d.claim_id, d.sent_claim_id, d.claimed_by, d.last_status_code,
			d.last_error, d.created_at, d.updated_at, d.xmin, l.attempt, l.started),
	opened AS (
		INSERT INTO webhook_attempts (id, tenant_id, delivery_id, subscription_id, number, trigger, started_at, duration_ms, result, instance)
		SELECT attempt, tenant_id, id, subscription_id, attempt_count, next_trigger, started, 0, 'in_flight', @instance FROM taken),
	abandoned AS (
		UPDATE webhook_attempts a SET result = 'unknown', error_class = 'unknown',
			error = 'the replica sending it stopped before recording the outcome'
		FROM taken t
		WHERE a.delivery_id = t.id AND a.result = 'in_flight' AND a.started_at < @abandoned)
	SELECT d.id, d.tenant_id, d.subscription_id, d.event_id, d.event_type, d.status, d.attempt_count,
		d.round_failures, d.next_trigger, d.next_attempt_at, d.claim_id, d.sent_claim_id, d.claimed_by,
		d.last_status_code, d.last_error, d.created_at, d.updated_at, d.xmin, d.attempt, d.started,
		s.url, s.secret, s.previous_secrets, s.headers, s.xmin,
		s.proxy_url, s.tls_client_certificate, s.tls_client_key, s.tls_ca_bundle, s.transform,
		e.type, e.data, e.created_at
	FROM taken d
	JOIN sub s ON s.id = d.subscription_id
	JOIN webhook_events e ON e.tenant_id = d.tenant_id AND e.id = d.event_id`,
		sql.Named("ids", pgArray[string](ids)), sql.Named("tenants", pgArray[string](tenants)), sql.Named("claims", pgArray[string](claims)),
		sql.Named("attempts", pgArray[string](attempts)), sql.Named("slots", pgArray[*time.Time](slots)), sql.Named("lease", terms.LeaseUntil), sql.Named("keep", terms.KeepLeaseFrom), sql.Named("instance", terms.Instance),
		sql.Named("pending", StatusPending), sql.Named("now", terms.Now), sql.Named("abandoned", terms.AbandonedBefore)).Rows()
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
	failing    bool   // failingHealth: its new deliveries wait for the sweep
}

// failingHealth says, of a subscription's health row h, that its endpoint is failing: its last 3
// attempts failed (one failure may be a blip; three are a pattern). Such an endpoint's new deliveries wait for the sweep instead of being
// requested at once, and the sweep serves it after healthy ones: endpoints that hang or refuse must
// not fill the queue and the sweep that healthy ones need.
const failingHealth = "coalesce(h.consecutive_failures, 0) >= 3"

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
	rows, err := s.conn(ctx).Raw(`SELECT s.tenant_id, s.id, s.event_types, s.filter, `+failingHealth+`
		FROM webhook_subscriptions s LEFT JOIN webhook_subscription_health h ON h.subscription_id = s.id
		WHERE s.tenant_id = ANY(CAST(@tenants AS text[])::uuid[]) AND s.status <> @disabled AND s.deleted_at IS NULL
		ORDER BY s.tenant_id, s.id`, sql.Named("tenants", pgArray[string](ids)), sql.Named("disabled", StatusDisabled)).Rows()
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
	rows, err := s.conn(ctx).Raw(`INSERT INTO webhook_events (id, tenant_id, type, data, created_at)
		SELECT id, tenant, type, data, at FROM unnest(CAST(@ids AS text[]), CAST(@tenants AS text[])::uuid[],
			CAST(@types AS text[]), CAST(@data AS text[])::jsonb[], CAST(@ats AS timestamptz[])) AS e(id, tenant, type, data, at)
		ORDER BY tenant, id
		ON CONFLICT DO NOTHING RETURNING tenant_id, id`,
		sql.Named("ids", pgArray[string](ids)), sql.Named("tenants", pgArray[string](tenants)), sql.Named("types", pgArray[string](types)),
		sql.Named("data", pgArray[string](data)), sql.Named("ats", pgArray[time.Time](ats))).Rows()
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
	return s.conn(ctx).Exec(`INSERT INTO webhook_deliveries (id, tenant_id, subscription_id, event_id, event_type, status,
			next_trigger, next_attempt_at, claim_id, claimed_by, created_at, updated_at)
		SELECT id, tenant, sub, event, type, @status, @trigger,
			CASE WHEN claim = '' THEN CAST(@at AS timestamptz) ELSE CAST(@lease AS timestamptz) END, CAST(NULLIF(claim, '') AS uuid),
			CASE WHEN claim = '' THEN '' ELSE CAST(@by AS text) END, @at, @at
		FROM unnest(CAST(@ids AS text[])::uuid[], CAST(@tenants AS text[])::uuid[], CAST(@subs AS text[])::uuid[],
			CAST(@events AS text[]), CAST(@types AS text[]), CAST(@claims AS text[])) AS r(id, tenant, sub, event, type, claim)`,
		sql.Named("status", StatusPending), sql.Named("trigger", TriggerScheduled), sql.Named("lease", lease),
		sql.Named("by", holder), sql.Named("at", first.CreatedAt),
		sql.Named("ids", pgArray[string](ids)), sql.Named("tenants", pgArray[string](tenants)), sql.Named("subs", pgArray[string](subs)),
		sql.Named("events", pgArray[string](events)), sql.Named("types", pgArray[string](types)), sql.Named("claims", pgArray[string](claims))).Error
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
// and so on, at most perSubscription of each, so one endpoint's backlog cannot fill the batch while
// another's retries wait. A failing subscription (failingHealth) gets its first turn with the others
// and its further turns after every healthy one's: endpoints that hang keep many deliveries due (put
// back by the send gate, or new), and those must not crowd a healthy endpoint's out of the batch.
// Paused and disabled subscriptions, and disabled tenants, are skipped: their deliveries wait,
// pending, with no attempt spent.
func (s store) dueDeliveries(ctx context.Context, now time.Time, limit, perSubscription int) ([]*Delivery, error) {
	var ds []*Delivery
	err := s.conn(ctx).Raw(`SELECT d.* FROM webhook_subscriptions s
		LEFT JOIN webhook_subscription_health h ON h.subscription_id = s.id
		CROSS JOIN LATERAL (
			SELECT x.*, row_number() OVER (ORDER BY x.next_attempt_at) AS turn
			FROM (SELECT d.*, d.xmin AS xmin FROM webhook_deliveries d
				WHERE d.subscription_id = s.id AND d.status = ? AND d.next_attempt_at <= ?
				ORDER BY d.next_attempt_at LIMIT ?) x) d
		WHERE s.status = ? AND s.deleted_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = s.tenant_id AND t.disabled_at IS NOT NULL)
		ORDER BY CASE WHEN d.turn > 1 AND `+failingHealth+` THEN d.turn + ? ELSE d.turn END, d.next_attempt_at
		LIMIT ?`, StatusPending, now, perSubscription, StatusActive, perSubscription, limit).Scan(&ds).Error
	return ds, err
}

// countDue counts the due pending deliveries of active subscriptions of enabled tenants (what the
// sweep would claim: the backlog gauge), one subscription at a time through the (subscription_id, next_attempt_at) index the sweep
// reads too: no index of its own for every delivery write to keep up.
func (s store) countDue(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.conn(ctx).Raw(`SELECT coalesce(sum(due.n), 0) FROM webhook_subscriptions s
		CROSS JOIN LATERAL (SELECT count(*) AS n FROM webhook_deliveries d
			WHERE d.subscription_id = s.id AND d.status = ? AND d.next_attempt_at <= ?) due
		WHERE s.status = ? AND s.deleted_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = s.tenant_id AND t.disabled_at IS NOT NULL)`,
		StatusPending, now, StatusActive).Scan(&n).Error
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
