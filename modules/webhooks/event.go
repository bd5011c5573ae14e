package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/apperr"
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
	checkErr(&v, "type", validateEventType(in.Type))
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

// ingest stores the event and, in the same unit of work, one claimed delivery per matching active
// subscription and one DeliveryRequested per delivery in the outbox: all of it commits, or none.
func (s *Service) ingest(ctx context.Context, in EventInput) (Ingested, error) {
	out := Ingested{ID: in.ID, Type: in.Type}
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		now := s.now()
		at := now
		if !in.occurredAt.IsZero() {
			at = in.occurredAt.UTC().Truncate(time.Microsecond)
		}
		ev := &eventRecord{ID: in.ID, Type: in.Type, Data: in.Data, CreatedAt: at}
		inserted, err := s.store.insertEvent(ctx, ev)
		if err != nil {
			return fmt.Errorf("store event: %w", err)
		}
		if !inserted {
			first, err := s.store.event(ctx, in.ID)
			if err != nil {
				return err
			}
			if in.samePayload {
				same, err := s.store.sameEvent(ctx, ev)
				if err != nil {
					return err
				}
				if !same {
					return apperr.StateConflict(CodeEventIDReused,
						"event "+in.ID+" was already published with another type or data; use a new id")
				}
			}
			n, err := s.store.countDeliveries(ctx, in.ID)
			if err != nil {
				return err
			}
			out = Ingested{ID: first.ID, Type: first.Type, Deliveries: n, Duplicate: true}
			return nil
		}
		targets, err := s.store.fanOutTargets(ctx)
		if err != nil {
			return fmt.Errorf("load subscriptions: %w", err)
		}
		var deliveries []*Delivery
		var requests []messaging.Event
		for _, t := range targets {
			if !anyPatternMatches(t.eventTypes, in.Type) {
				continue
			}
			d, claim, err := newDelivery(t.id, in.ID, in.Type, now, s.cfg.ClaimLease, s.instance)
			if err != nil {
				return err
			}
			req, err := s.deliveryRequested(ctx, d, claim)
			if err != nil {
				return err
			}
			deliveries = append(deliveries, d)
			requests = append(requests, req)
		}
		if err := s.store.createDeliveries(ctx, deliveries); err != nil {
			return fmt.Errorf("store deliveries: %w", err)
		}
		if len(requests) > 0 {
			if err := s.events.Publish(ctx, requests...); err != nil {
				return fmt.Errorf("publish delivery requests: %w", err)
			}
		}
		out.Deliveries = len(deliveries)
		return nil
	})
	return out, err
}

// deliveryRequested is the outbox message asking a consumer to attempt a claimed delivery.
func (s *Service) deliveryRequested(ctx context.Context, d *Delivery, claim uuid.UUID) (messaging.Event, error) {
	e, err := messaging.NewEvent(ctx, contract.Source, contract.DeliveryRequested, contract.DeliveryRequestedPayload{
		DeliveryID: d.ID, ClaimID: claim, SubscriptionID: d.SubscriptionID, RateSlotAt: d.RateSlotAt,
	})
	if d.TenantID != uuid.Nil {
		e.TenantID = d.TenantID // the sweep claims in a system context: the delivery names its tenant
	}
	return e, err
}
