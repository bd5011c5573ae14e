// Package queries holds the delivery engine's hot-path statements: one .sql file per statement,
// each with a typed parameter struct whose Args are the statement's named parameters. A reader
// changing how a claim is taken or an outcome recorded reads one file of SQL, and its parameters
// cannot drift from their names: a struct field per @name, checked by this package's tests.
//
// Batch statements take arrays (Array), never one parameter per row, so their text is the same
// for any batch size and PostgreSQL plans them once.
package queries

import (
	"database/sql"
	"database/sql/driver"
	"embed"
	"strings"
	"time"

	"github.com/google/uuid"
)

//go:embed *.sql
var files embed.FS

// FailingHealth says, of a subscription's health row h, that its endpoint is failing: its last 3
// attempts failed (one failure may be a blip; three are a pattern). Such an endpoint's new deliveries
// wait for the sweep instead of being requested at once, and the sweep serves it after healthy ones.
// Statements write it as {{failing_health}}.
const FailingHealth = "coalesce(h.consecutive_failures, 0) >= 3"

// load reads a statement and fills in the fragments it shares with others.
func load(name string) string {
	b, err := files.ReadFile(name + ".sql")
	if err != nil {
		panic(err) // embedded at build time: a missing file is a build mistake
	}
	return strings.ReplaceAll(string(b), "{{failing_health}}", FailingHealth)
}

var (
	takeClaims        = load("take_claims")
	recordOutcomes    = load("record_outcomes")
	insertEvents      = load("insert_events")
	createDeliveries  = load("create_deliveries")
	fanOutTargets     = load("fan_out_targets")
	dueDeliveries     = load("due_deliveries")
	countDue          = load("count_due")
	waitingDeliveries = load("waiting_deliveries")
	sameEvent         = load("same_event")
	putBacks          = load("put_backs")
)

// Array passes a Go slice as one PostgreSQL array parameter (CAST(@x AS text[]) and the like):
// gorm would expand a bare slice into a list of parameters, one per element, and a statement whose
// text changes with the batch size is planned anew every time.
type Array[T any] []T

// Value hands the slice itself to pgx, which encodes it as an array.
func (a Array[T]) Value() (driver.Value, error) { return []T(a), nil }

// TakeClaims takes a batch of (delivery, claim) pairs: take_claims.sql.
type TakeClaims struct {
	IDs, Tenants, Claims, Attempts []string     // one per pair; Attempts are the attempt rows the take opens
	Slots                          []*time.Time // the reserved send slot of each pair, if any
	Now, LeaseUntil, KeepLeaseFrom time.Time    // the lease restarts to LeaseUntil unless it runs until KeepLeaseFrom
	AbandonedBefore                time.Time    // in_flight attempts started before this are closed as unknown
	Instance, Pending              string       // the taker; the pending status
}

// SQL is the statement's text.
func (TakeClaims) SQL() string { return takeClaims }

// Args are its named parameters.
func (p TakeClaims) Args() []any {
	return []any{sql.Named("ids", Array[string](p.IDs)), sql.Named("tenants", Array[string](p.Tenants)),
		sql.Named("claims", Array[string](p.Claims)), sql.Named("attempts", Array[string](p.Attempts)),
		sql.Named("slots", Array[*time.Time](p.Slots)), sql.Named("lease", p.LeaseUntil), sql.Named("keep", p.KeepLeaseFrom),
		sql.Named("instance", p.Instance), sql.Named("pending", p.Pending), sql.Named("now", p.Now),
		sql.Named("abandoned", p.AbandonedBefore)}
}

// RecordOutcomes writes a batch of outcomes, each over the version its take returned: record_outcomes.sql.
// The first group is one entry per outcome; the second one per subscription whose health changes.
type RecordOutcomes struct {
	IDs, Tenants              []string
	Versions                  []int64 // xmin the take returned
	Statuses, Triggers        []string
	Attempts, Rounds          []int64
	Nexts                     []*time.Time
	Claims                    []*string
	ClaimedBy, LastErrors     []string
	LastCodes                 []*int64
	AttemptIDs, Results       []string
	Durations                 []int64
	Codes                     []*int64
	Classes, Errors, Excerpts []string
	Headers                   []string // jsonb text
	Subs                      []string
	Succeeded, Failed         []bool
	Failures                  []int64
	Since                     []*time.Time
	Hung                      []bool    // the subscription's last outcome timed out: hold it until HoldUntil...
	HoldUntil, HungSince      time.Time // ...unless it answered after HungSince; any other outcome ends a hold
	Now, RefreshedAfter       time.Time // a success older than RefreshedAfter writes last_success_at again
}

// SQL is the statement's text.
func (RecordOutcomes) SQL() string { return recordOutcomes }

// Args are its named parameters.
func (p RecordOutcomes) Args() []any {
	return []any{sql.Named("ids", Array[string](p.IDs)), sql.Named("tenants", Array[string](p.Tenants)),
		sql.Named("versions", Array[int64](p.Versions)), sql.Named("statuses", Array[string](p.Statuses)),
		sql.Named("attempts", Array[int64](p.Attempts)), sql.Named("rounds", Array[int64](p.Rounds)),
		sql.Named("triggers", Array[string](p.Triggers)), sql.Named("nexts", Array[*time.Time](p.Nexts)),
		sql.Named("claims", Array[*string](p.Claims)), sql.Named("claimed_by", Array[string](p.ClaimedBy)),
		sql.Named("last_codes", Array[*int64](p.LastCodes)), sql.Named("last_errors", Array[string](p.LastErrors)),
		sql.Named("attempt_ids", Array[string](p.AttemptIDs)), sql.Named("results", Array[string](p.Results)),
		sql.Named("durations", Array[int64](p.Durations)), sql.Named("codes", Array[*int64](p.Codes)),
		sql.Named("classes", Array[string](p.Classes)), sql.Named("errors", Array[string](p.Errors)),
		sql.Named("excerpts", Array[string](p.Excerpts)), sql.Named("headers", Array[string](p.Headers)),
		sql.Named("subs", Array[string](p.Subs)), sql.Named("succeeded", Array[bool](p.Succeeded)),
		sql.Named("failed", Array[bool](p.Failed)), sql.Named("failures", Array[int64](p.Failures)),
		sql.Named("since", Array[*time.Time](p.Since)), sql.Named("hung", Array[bool](p.Hung)),
		sql.Named("hold_until", p.HoldUntil), sql.Named("hung_since", p.HungSince),
		sql.Named("now", p.Now), sql.Named("refreshed_after", p.RefreshedAfter)}
}

// InsertEvents stores the events whose key is new and returns their keys: insert_events.sql.
type InsertEvents struct {
	IDs, Tenants, Types, Data []string // Data is jsonb text
	At                        []time.Time
}

// SQL is the statement's text.
func (InsertEvents) SQL() string { return insertEvents }

// Args are its named parameters.
func (p InsertEvents) Args() []any {
	return []any{sql.Named("ids", Array[string](p.IDs)), sql.Named("tenants", Array[string](p.Tenants)),
		sql.Named("types", Array[string](p.Types)), sql.Named("data", Array[string](p.Data)), sql.Named("ats", Array[time.Time](p.At))}
}

// CreateDeliveries inserts a fan-out's deliveries: create_deliveries.sql. The columns they share are
// single parameters; a row with an empty claim is stored unclaimed and due at At.
type CreateDeliveries struct {
	Status, Trigger                           string
	Lease                                     time.Time // next_attempt_at of the claimed rows
	By                                        string    // claimed_by of the claimed rows
	At                                        time.Time // created_at, updated_at, and the due time of the unclaimed rows
	IDs, Tenants, Subs, Events, Types, Claims []string
}

// SQL is the statement's text.
func (CreateDeliveries) SQL() string { return createDeliveries }

// Args are its named parameters.
func (p CreateDeliveries) Args() []any {
	return []any{sql.Named("status", p.Status), sql.Named("trigger", p.Trigger), sql.Named("lease", p.Lease),
		sql.Named("by", p.By), sql.Named("at", p.At),
		sql.Named("ids", Array[string](p.IDs)), sql.Named("tenants", Array[string](p.Tenants)), sql.Named("subs", Array[string](p.Subs)),
		sql.Named("events", Array[string](p.Events)), sql.Named("types", Array[string](p.Types)), sql.Named("claims", Array[string](p.Claims))}
}

// FanOutTargets reads the subscriptions the tenants' events fan out to: fan_out_targets.sql.
type FanOutTargets struct {
	Tenants  []string
	Disabled string // the status that receives nothing
}

// SQL is the statement's text.
func (FanOutTargets) SQL() string { return fanOutTargets }

// Args are its named parameters.
func (p FanOutTargets) Args() []any {
	return []any{sql.Named("tenants", Array[string](p.Tenants)), sql.Named("disabled", p.Disabled)}
}

// DueDeliveries reads the deliveries a sweep claims, round-robin across subscriptions: due_deliveries.sql.
type DueDeliveries struct {
	Pending, Active string
	Now             time.Time
	PerSubscription int // turns of one failing subscription at most
	Limit           int // deliveries in all, and turns of one healthy subscription at most
}

// SQL is the statement's text.
func (DueDeliveries) SQL() string { return dueDeliveries }

// Args are its named parameters.
func (p DueDeliveries) Args() []any {
	return []any{sql.Named("pending", p.Pending), sql.Named("now", p.Now), sql.Named("per_subscription", p.PerSubscription),
		sql.Named("active", p.Active), sql.Named("limit", p.Limit)}
}

// CountDue counts what a sweep would claim (the backlog gauge): count_due.sql.
type CountDue struct {
	Pending, Active string
	Now             time.Time
}

// SQL is the statement's text.
func (CountDue) SQL() string { return countDue }

// Args are its named parameters.
func (p CountDue) Args() []any {
	return []any{sql.Named("pending", p.Pending), sql.Named("now", p.Now), sql.Named("active", p.Active)}
}

// WaitingDeliveries reads a tenant's deliveries the sweep would claim now had its lease ended, in id
// order after After: waiting_deliveries.sql (a tenant enabled again requests them at once).
type WaitingDeliveries struct {
	Tenant          uuid.UUID
	Pending, Active string
	After           uuid.UUID
	Now, LeaseEndBy time.Time
	Limit           int
}

// SQL is the statement's text.
func (WaitingDeliveries) SQL() string { return waitingDeliveries }

// Args are its named parameters.
func (p WaitingDeliveries) Args() []any {
	return []any{sql.Named("tenant", p.Tenant), sql.Named("pending", p.Pending), sql.Named("after", p.After),
		sql.Named("now", p.Now), sql.Named("lease_end_by", p.LeaseEndBy), sql.Named("active", p.Active), sql.Named("limit", p.Limit)}
}

// SameEvent compares a stored event with a posted one as PostgreSQL sees them (data as jsonb):
// same_event.sql.
type SameEvent struct {
	Tenant   uuid.UUID
	ID, Type string
	Data     string // JSON text
}

// SQL is the statement's text.
func (SameEvent) SQL() string { return sameEvent }

// Args are its named parameters.
func (p SameEvent) Args() []any {
	return []any{sql.Named("tenant", p.Tenant), sql.Named("id", p.ID), sql.Named("type", p.Type), sql.Named("data", p.Data)}
}

// PutBacks releases a batch of untaken claims until their due times, keeping reserved rate slots:
// put_backs.sql. One entry per claim.
type PutBacks struct {
	IDs, Tenants, Claims []string
	Dues                 []time.Time
	Slots                []*time.Time
	Pending              string
}

// SQL is the statement's text.
func (PutBacks) SQL() string { return putBacks }

// Args are its named parameters.
func (p PutBacks) Args() []any {
	return []any{sql.Named("ids", Array[string](p.IDs)), sql.Named("tenants", Array[string](p.Tenants)),
		sql.Named("claims", Array[string](p.Claims)), sql.Named("dues", Array[time.Time](p.Dues)),
		sql.Named("slots", Array[*time.Time](p.Slots)), sql.Named("pending", p.Pending)}
}
