package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/modules/webhooks/internal/eventtype"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

// CodeEventTypeReserved refuses a client's event whose type a module owns.
const CodeEventTypeReserved = "event_type_reserved"

// eventIDPattern is what a client-chosen event id may look like.
var eventIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// eventRecord is a webhook event: what every delivery of it sends.
type eventRecord struct {
	ID string `gorm:"column:id;primaryKey"`
	tenancy.Owned
	Type      string          `gorm:"column:type"`
	Data      json.RawMessage `gorm:"column:data"`
	CreatedAt time.Time       `gorm:"column:created_at"` // the event's time: an integration event's occurred_at
}

func (eventRecord) TableName() string { return "webhook_events" }

// body is the request body every attempt sends: built from the stored event, so every attempt
// sends the same bytes.
func (e *eventRecord) body() ([]byte, error) {
	return json.Marshal(struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{e.ID, e.Type, e.CreatedAt.UTC(), e.Data})
}

// EventInput is an event to deliver. ID "" gets a generated one; the same ID again is a no-op.
type EventInput struct {
	ID   string
	Type string
	Data json.RawMessage

	occurredAt time.Time // the integration event's time; zero = ingestion time
	// samePayload refuses a stored id with another type or data (a client's POST); integration events,
	// redelivered with the same id, are duplicates whatever they carry.
	samePayload bool
}

// Ingested says what became of an event: its deliveries, or the first event with that id.
type Ingested struct {
	ID         string
	Type       string
	Deliveries int
	Duplicate  bool
}

// validate checks a client's event.
func (in *EventInput) validate() error {
	var v apperr.Validator
	if in.ID != "" {
		v.Check(eventIDPattern.MatchString(in.ID), "id", "must be 1–128 letters, digits, \"_\" or \"-\"")
	}
	checkErr(&v, "type", eventtype.Validate(in.Type))
	trimmed := bytes.TrimSpace(in.Data)
	v.Check(len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed), "data", "must be a JSON object")
	return v.Err()
}

// PublishEvent ingests a client's event (POST /events).
func (s *Service) PublishEvent(ctx context.Context, in EventInput) (Ingested, error) {
	if err := s.checkEventSize(in.Data); err != nil {
		return Ingested{}, err
	}
	if err := in.validate(); err != nil {
		return Ingested{}, err
	}
	if owner, reserved := s.catalog.Owner(in.Type); reserved {
		return Ingested{}, apperr.Refused(CodeEventTypeReserved, "type",
			"is an event type of module "+owner+": only that module publishes it")
	}
	if in.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return Ingested{}, err
		}
		in.ID = id.String()
	}
	in.samePayload = true
	return s.ingest(ctx, in)
}

// handleIntegrationEvent turns another module's integration event into a webhook event with the same
// id, type and payload; a redelivered message finds its event already stored and fans out nothing.
func (s *Service) handleIntegrationEvent(ctx context.Context, e messaging.Event) error {
	data := e.Payload
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		// Webhook data is an object: a payload of another shape is wrapped rather than lost.
		wrapped, err := json.Marshal(map[string]json.RawMessage{"value": orNull(data)})
		if err != nil {
			return err
		}
		data = wrapped
	}
	if !eventIDPattern.MatchString(e.ID) {
		s.log.Error("integration event id cannot be a webhook event id", "event_id", e.ID, "type", e.Type)
		return nil
	}
	_, err := s.ingest(ctx, EventInput{ID: e.ID, Type: e.Type, Data: data, occurredAt: e.OccurredAt})
	return err
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// ingestBatch is the most events one unit of work ingests together.
const ingestBatch = 64

// ingest stores the event and, in the same unit of work, one claimed delivery per matching active
// subscription and one DeliveryRequested per delivery in the outbox: all of it commits, or none. A
// failing subscription's delivery is stored unclaimed and due instead, for the sweep (queries.FailingHealth), as is a held endpoint's (breaker.go).
// Called outside a unit of work, the event joins those of concurrent callers in one (group commit,
// writeIngests); inside one, it is written there, with the caller's other writes.
func (s *Service) ingest(ctx context.Context, in EventInput) (Ingested, error) {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return Ingested{}, err
	}
	if !database.InTx(ctx) {
		res, err := s.ingests.Do(ctx, ingestRequest{ctx: ctx, tenant: tenant, in: in})
		if err != nil {
			return Ingested{}, err
		}
		if res.stored {
			return res.out, nil
		}
		// A duplicate id, or a batch that failed as a whole: on its own, where duplicates are answered.
	}
	var out Ingested
	err = s.db.WithTx(ctx, func(ctx context.Context) error {
		res, err := s.storeEvents(ctx, []ingestRequest{{ctx: ctx, tenant: tenant, in: in}})
		if err != nil {
			return err
		}
		if res[0].stored {
			out = res[0].out
			return nil
		}
		out, err = s.duplicate(ctx, in)
		return err
	})
	return out, err
}

// duplicate answers an event whose id is already stored: the first event and its deliveries, or a
// conflict when a client reuses the id for another type or data.
func (s *Service) duplicate(ctx context.Context, in EventInput) (Ingested, error) {
	first, err := s.store.event(ctx, in.ID)
	if err != nil {
		return Ingested{}, err
	}
	if in.samePayload {
		same, err := s.store.sameEvent(ctx, &eventRecord{ID: in.ID, Type: in.Type, Data: in.Data})
		if err != nil {
			return Ingested{}, err
		}
		if !same {
			return Ingested{}, apperr.StateConflict(CodeEventIDReused,
				"event "+in.ID+" was already published with another type or data; use a new id")
		}
	}
	n, err := s.store.countDeliveries(ctx, in.ID)
	if err != nil {
		return Ingested{}, err
	}
	return Ingested{ID: first.ID, Type: first.Type, Deliveries: n, Duplicate: true}, nil
}

// ingestRequest is one event to ingest, with its caller's context: its tenant, correlation id and
// trace go to the event's deliveries; the context's deadline does not bound the batch.
type ingestRequest struct {
	ctx    context.Context
	tenant uuid.UUID
	in     EventInput
}

// ingestResult is what became of one ingestRequest: stored, or to be ingested on its own.
type ingestResult struct {
	out    Ingested
	stored bool
}

// writeIngests ingests the events of concurrent callers in one unit of work: one statement each for
// the events, their tenants' subscriptions, the deliveries and the outbox rows, and one commit,
// whatever the number of events and deliveries. If the batch fails, each event is retried on its own,
// so one event's fault is its own.
func (s *Service) writeIngests(ctx context.Context, reqs []ingestRequest) ([]ingestResult, error) {
	ctx = tenancy.System(ctx, "webhooks ingest") // the batch spans tenants: every row names its own
	var out []ingestResult
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		var err error
		out, err = s.storeEvents(ctx, reqs)
		return err
	})
	if err != nil && len(reqs) > 1 {
		s.log.Warn("a batch of events failed; each is retried on its own", "events", len(reqs), "error", err)
		return make([]ingestResult, len(reqs)), nil
	}
	return out, err
}

// storeEvents writes, in the unit of work of ctx, the events of reqs that are new, with their
// deliveries and delivery requests; an event already stored is left to the caller (stored false).
func (s *Service) storeEvents(ctx context.Context, reqs []ingestRequest) ([]ingestResult, error) {
	now := s.now()
	records := make([]*eventRecord, len(reqs))
	for i, r := range reqs {
		at := now
		if !r.in.occurredAt.IsZero() {
			at = r.in.occurredAt.UTC().Truncate(time.Microsecond)
		}
		records[i] = &eventRecord{ID: r.in.ID, Owned: tenancy.Owned{TenantID: r.tenant}, Type: r.in.Type, Data: r.in.Data, CreatedAt: at}
	}
	stored, err := s.store.insertEvents(ctx, records)
	if err != nil {
		return nil, fmt.Errorf("store events: %w", err)
	}
	var tenants []uuid.UUID
	for k := range stored {
		if !slices.Contains(tenants, k.tenant) {
			tenants = append(tenants, k.tenant)
		}
	}
	out := make([]ingestResult, len(reqs))
	if len(tenants) == 0 {
		return out, nil
	}
	targets, err := s.store.fanOutTargets(ctx, tenants)
	if err != nil {
		return nil, fmt.Errorf("load subscriptions: %w", err)
	}
	var deliveries []*Delivery
	var requests []messaging.Event
	for i, r := range reqs {
		if !stored[eventKey{r.tenant, r.in.ID}] {
			continue
		}
		n := 0
		var requested []*Delivery
		var input expressionInput // built for the first filter that needs it
		for _, t := range targets[r.tenant] {
			if !eventtype.AnyMatches(t.eventTypes, r.in.Type) {
				continue
			}
			if t.filter != "" && !s.passesFilter(t, r.in, records[i].CreatedAt, &input) {
				continue
			}
			n++
			d, err := newWaitingDelivery(t.id, r.in.ID, r.in.Type, now)
			if err != nil {
				return nil, err
			}
			d.TenantID = r.tenant
			deliveries = append(deliveries, d)
			if t.failing {
				continue // due and unclaimed: the sweep requests it
			}
			d.Claim(now, s.cfg.ClaimLease, s.instance)
			requested = append(requested, d)
		}
		events, err := s.deliveryRequests(r.ctx, requested)
		if err != nil {
			return nil, err
		}
		for _, e := range events {
			requests = append(requests, e.InTraceOf(r.ctx))
		}
		out[i] = ingestResult{out: Ingested{ID: r.in.ID, Type: r.in.Type, Deliveries: n}, stored: true}
	}
	if err := s.store.createDeliveries(ctx, deliveries); err != nil {
		return nil, fmt.Errorf("store deliveries: %w", err)
	}
	if len(requests) > 0 {
		if err := s.events.Publish(ctx, requests...); err != nil {
			return nil, fmt.Errorf("publish delivery requests: %w", err)
		}
	}
	return out, nil
}

// passesFilter evaluates a subscription's filter on an event at fan-out: false, or an error (logged
// and counted), means the subscription gets no delivery of it. input is the event as expressions see
// it, decoded once for all the filters of one event.
func (s *Service) passesFilter(t fanOutTarget, in EventInput, at time.Time, input *expressionInput) bool {
	prg, err := s.filters.of(t.filter)
	if err == nil && *input == nil {
		*input, err = newExpressionInput(in.ID, in.Type, at, in.Data)
	}
	ok := false
	if err == nil {
		ok, err = filterMatches(prg, *input)
	}
	switch {
	case err != nil:
		s.metrics.filtered.WithLabelValues("error").Inc()
		s.log.Debug("a subscription's filter failed on an event: no delivery", "subscription_id", t.id, "event_id", in.ID, "error", err)
	case !ok:
		s.metrics.filtered.WithLabelValues("false").Inc()
	}
	return ok
}

// requestBatch is the most deliveries one DeliveriesRequested message names: a consumer attempts them
// together, and acknowledges the message when the last of them is done.
const requestBatch = 64

// deliveryRequests are the outbox messages asking consumers to attempt claimed deliveries, each under
// its current claim: one DeliveriesRequested per tenant and requestBatch deliveries, in their order.
// One message for many deliveries is one outbox row, one publish and one consume for all of them.
func (s *Service) deliveryRequests(ctx context.Context, ds []*Delivery) ([]messaging.Event, error) {
	var tenants []uuid.UUID
	byTenant := map[uuid.UUID][]contract.DeliveryRequestedPayload{}
	for _, d := range ds {
		if _, seen := byTenant[d.TenantID]; !seen {
			tenants = append(tenants, d.TenantID)
		}
		byTenant[d.TenantID] = append(byTenant[d.TenantID], contract.DeliveryRequestedPayload{
			DeliveryID: d.ID, ClaimID: *d.ClaimID, SubscriptionID: d.SubscriptionID, RateSlotAt: d.RateSlotAt,
		})
	}
	var out []messaging.Event
	for _, tenant := range tenants {
		for batch := range slices.Chunk(byTenant[tenant], requestBatch) {
			e, err := messaging.NewEvent(ctx, contract.Source, contract.DeliveriesRequested, contract.DeliveriesRequestedPayload{Deliveries: batch})
			if err != nil {
				return nil, err
			}
			if tenant != uuid.Nil {
				e.TenantID = tenant // the sweep claims in a system context: the deliveries name their tenant
			}
			out = append(out, e)
		}
	}
	return out, nil
}
