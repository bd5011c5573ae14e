// Package module is the contract every Keelson module implements and the registry app wires them with.
package module

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/secrets"
)

// Module is one business capability: its tables, routes, event handlers, job kinds and schedules.
// Adding a module = a folder under modules/, a folder under migrations/, one line in app/.
type Module interface {
	// Name is lower_snake: it names the migration owner, the consumers and the log attribute.
	Name() string
	// Migrations returns the module's embedded SQL migrations, or nil.
	Migrations() fs.FS
	// Register declares what the module contributes. It runs once at start, before anything is served.
	Register(r *Registry) error
}

// EventPublisher writes integration events into the outbox of the unit of work in ctx.
// Without a transaction in ctx it returns an error: events leave only with the writes that produced them.
type EventPublisher interface {
	Publish(ctx context.Context, events ...messaging.Event) error
}

// JobEnqueuer enqueues background work, inside the unit of work in ctx when there is one.
type JobEnqueuer interface {
	Enqueue(ctx context.Context, kind string, payload any, opts jobs.EnqueueOptions) (jobs.EnqueueResult, error)
}

// Deps are the platform services a module may use.
type Deps struct {
	DB         *database.DB
	Events     EventPublisher
	Jobs       JobEnqueuer
	Logger     *slog.Logger
	Metrics    prometheus.Registerer
	InstanceID string
	// TracerProvider records the module's own spans; nil when tracing is off.
	TracerProvider trace.TracerProvider
	// Secrets seals what a module stores at rest; nil (or without keys) stores values as they are.
	Secrets *secrets.Box
}

// Registry collects what modules declare; app turns it into routes, consumers, workers and schedules.
type Registry struct {
	Deps
	module string
	*declared
}

type declared struct {
	routes        []RouteSet
	subscriptions []messaging.Subscription
	jobKinds      []jobs.Kind
	schedules     []jobs.Schedule
	conflictCodes map[string]httpapi.ConflictAnswer
	catalog       *Catalog
	catalogSubs   []messaging.Subscription // EventTypes filled with the catalog's types when read
	resealers     []Resealer
	loops         []Loop
}

// Loop is per-replica housekeeping: every replica running background work runs it until shutdown
// ends its ctx (a Schedule runs once per interval across the cluster instead).
type Loop struct {
	Name string
	Run  func(ctx context.Context) error // returns once ctx ends
}

// Resealer rewrites a module's sealed values under the current key (`keelson secrets reencrypt`):
// each call handles at most batch rows not yet under it and returns how many it rewrote; 0 = done.
type Resealer struct {
	Name   string
	Reseal func(ctx context.Context, batch int) (int, error)
	// KeyIDs lists the distinct ids of the keys the stored values are sealed under, so a replica
	// lacking one refuses to start; nil = not checked.
	KeyIDs func(ctx context.Context) ([]string, error)
}

// RouteSet declares a module's routes on the authenticated /api/v1 group.
type RouteSet struct {
	Module string
	Mount  func(api *httpapi.API)
}

// NewRegistry returns an empty registry carrying deps.
func NewRegistry(deps Deps) *Registry {
	return &Registry{Deps: deps, declared: &declared{conflictCodes: map[string]httpapi.ConflictAnswer{}, catalog: newCatalog()}}
}

// Requires fails, naming the module, when one of the named dependencies ("DB", "Events", "Jobs",
// "Logger", "Metrics") is missing: a module's Register starts with it.
func (r *Registry) Requires(deps ...string) error {
	present := map[string]bool{"DB": r.DB != nil, "Events": r.Events != nil, "Jobs": r.Jobs != nil,
		"Logger": r.Logger != nil, "Metrics": r.Metrics != nil}
	var missing []string
	for _, d := range deps {
		if ok, known := present[d]; !known || !ok {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: missing %s", r.module, strings.Join(missing, ", "))
	}
	return nil
}

// For returns the registry as seen by one module: its logger names the module.
// Declarations made through it land in the same registry.
func (r *Registry) For(m Module) *Registry {
	deps := r.Deps
	if deps.Logger != nil {
		deps.Logger = deps.Logger.With("module", m.Name())
	}
	return &Registry{Deps: deps, module: m.Name(), declared: r.declared}
}

// Routes declares handlers under /api/v1 (bearer auth already applied), with httpapi.Handle on
// api.Module(prefix, tag): the OpenAPI document is generated from those declarations.
func (r *Registry) Routes(mount func(api *httpapi.API)) {
	r.routes = append(r.routes, RouteSet{Module: r.module, Mount: mount})
}

// Subscribe handles integration events of the given types under a named consumer.
func (r *Registry) Subscribe(s messaging.Subscription) {
	r.subscriptions = append(r.subscriptions, s)
}

// PublicEvents declares the module's public integration events (its contract's list); the start
// fails on a duplicate type or one outside the module's prefix (see Err).
func (r *Registry) PublicEvents(events ...EventType) {
	for _, e := range events {
		r.catalog.add(r.module, e)
	}
}

// Catalog is every module's public events; complete once all modules registered.
func (r *Registry) Catalog() *Catalog { return r.catalog }

// SubscribePublicEvents is Subscribe to every type of the catalog, whichever module declares it.
func (r *Registry) SubscribePublicEvents(s messaging.Subscription) {
	r.catalogSubs = append(r.catalogSubs, s)
}

// Err reports declarations refused at registration; the replica must not start with any.
func (r *Registry) Err() error { return r.catalog.Err() }

// JobKind registers a background job kind.
func (r *Registry) JobKind(k jobs.Kind) { r.jobKinds = append(r.jobKinds, k) }

// Schedule registers a recurring task that runs at most once at a time across replicas.
func (r *Registry) Schedule(s jobs.Schedule) { r.schedules = append(r.schedules, s) }

// ConflictCode makes a concurrency conflict on the module's table answer 409 with code and detail
// instead of concurrency_conflict: the table name is the stable key, whatever Go type maps it.
func (r *Registry) ConflictCode(table, code, detail string) {
	r.conflictCodes[table] = httpapi.ConflictAnswer{Code: code, Detail: detail}
}

// SealedData declares values the module stores sealed, for `keelson secrets reencrypt`.
func (r *Registry) SealedData(rs Resealer) {
	if rs.Name == "" {
		rs.Name = r.module
	}
	r.resealers = append(r.resealers, rs)
}

// Resealers returns what SealedData declared.
func (r *Registry) Resealers() []Resealer { return r.resealers }

// RouteSets returns the registered route sets.
func (r *Registry) RouteSets() []RouteSet { return r.routes }

// Subscriptions returns the registered consumers.
func (r *Registry) Subscriptions() []messaging.Subscription {
	out := append([]messaging.Subscription(nil), r.subscriptions...)
	types := r.catalog.Types()
	for _, s := range r.catalogSubs {
		if len(types) == 0 && len(s.EventTypes) == 0 {
			continue // no module declares a public event: nothing to consume
		}
		s.EventTypes = append(append([]string(nil), s.EventTypes...), types...)
		out = append(out, s)
	}
	return out
}

// JobKinds returns the registered job kinds.
func (r *Registry) JobKinds() []jobs.Kind { return r.jobKinds }

// Loop declares per-replica housekeeping, run by each replica that runs background work.
func (r *Registry) Loop(l Loop) { r.loops = append(r.loops, l) }

// Loops returns the declared per-replica loops.
func (r *Registry) Loops() []Loop { return r.loops }

// Schedules returns the registered schedules.
func (r *Registry) Schedules() []jobs.Schedule { return r.schedules }

// ConflictCodes returns the table → problem overrides.
func (r *Registry) ConflictCodes() map[string]httpapi.ConflictAnswer { return r.conflictCodes }
