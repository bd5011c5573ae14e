// Package webhooks delivers events to subscribers' HTTP endpoints: subscriptions with signed
// secrets, fan-out of events into claimed deliveries, a consumer that sends each claimed delivery
// once, retries swept on a schedule, redelivery on request, and the attempt log.
//
// The consumer's pipeline, per requested delivery: take → send → complete (Service.attempt). A
// request message (DeliveriesRequested) names up to requestBatch claimed deliveries of one tenant —
// those an event fanned out to, or those a sweep claimed — so one outbox row, one publish and one
// consume serve all of them; its handler attempts each at once in a handler place of its own
// (Concurrency per replica) and acknowledges the message when the last one is done. The take and the
// outcome are the two writes of a delivery, and each is batched with those of the replica's other
// handlers (group commit, see groupcommit): the takes of the requests that arrive together are one
// conditional UPDATE for all their (delivery, claim) pairs (store.takeClaims), and the outcomes of
// the sends that end together one xmin-guarded UPDATE (store.recordOutcomes). No timer: a batch is
// written as soon as the previous one ends, so a lone request waits for nothing and a burst shares
// one statement and one commit.
//
// Why the requests are batched where they are published, not in the message loop: the deliveries
// one unit of work claims are known together there, while collecting separate messages into batches
// in the AMQP loop would mean re-implementing retry, dead-lettering and the one-copy-at-a-time rule
// for batches. A message is acknowledged only after the outcomes of all its deliveries committed, so
// every guarantee of a message per delivery holds: a copy handled again (after a failure, or on
// another replica) finds its deliveries already taken or put back, and sends nothing for them; the
// send gate, the rate limit and pause still act per delivery, before its take. A replica that dies
// with a batch uncommitted loses nothing: its messages return to the queue (a take not committed
// took nothing; an outcome not committed leaves the row pending under its lease and its attempt
// in_flight, closed as unknown by the next claim's take).
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/modules/webhooks/internal/egress"
	"github.com/keelson/keelson/modules/webhooks/internal/groupcommit"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/tenancy"
)

// Name is the module's name: migration owner, consumer prefix, log attribute.
const Name = "webhooks"

// Consumers of the module.
const (
	fanoutConsumer   = "webhooks.fanout"
	deliveryConsumer = "webhooks.delivery"
	sweepSchedule    = "webhooks.sweep"
)

// Defaults of how many deliveries one replica sends at once, in all and to one endpoint: a send
// mostly waits on a remote server (up to SendTimeout); the send gate keeps slow endpoints to half of it.
const (
	defaultConcurrency         = 128
	defaultEndpointConcurrency = 32
)

const defaultSweepBatch = 500

// Config tunes delivery; app fills it from the WEBHOOKS_* variables (docs/operations.md).
type Config struct {
	AllowPrivateTargets bool            // allow loopback, private and link-local targets (dev and tests)
	AllowedTargets      []string        // host:port pairs reached even when private (a receiver on the compose network)
	EgressProxy         string          // HTTP CONNECT proxy of every request (ParseEgressProxy); "" = direct
	SendTimeout         time.Duration   // HTTP timeout of one attempt
	HangAfter           time.Duration   // no response headers after this long, and none from the endpoint meanwhile: hold it; 0 = 2 s
	HoldFor             time.Duration   // how long an endpoint whose request timed out stays held before a probe; 0 = 30 s
	ClaimLease          time.Duration   // how long a claim keeps the sweep away; must exceed SendTimeout by 500 ms or more (Validate)
	SweepInterval       time.Duration   // how often due deliveries are swept
	RetrySchedule       []time.Duration // delays after each failed attempt; attempts = len+1
	SweepBatch          int             // due deliveries claimed per sweep; 0 = 500
	RetryAfterMax       time.Duration   // cap on a receiver's Retry-After (429, 503); 0 = 1 h
	DisableAfter        time.Duration   // a subscription whose every attempt failed for this long is disabled...; 0 = 5 days
	DisableMinAttempts  int             // ...once at least this many attempts failed in a row; 0 = 10
	Concurrency         int             // deliveries one replica handles at once; 0 = 128 (at most messaging.MaxConcurrency)
	EndpointConcurrency int             // sends in flight to one fast endpoint per replica; 0 = 32
	Retention           time.Duration   // events, finished deliveries and attempts older than this are pruned; 0 keeps all
	RetentionBatch      int             // rows per pruning statement; 0 = 5000
	// MaxSubscriptionsPerTenant caps a tenant's live subscriptions; 0 = 100.
	MaxSubscriptionsPerTenant int
	// MaxEventBytes caps the data of an event posted to /events (413 beyond); 0 = 256 KiB, at most 1 MiB.
	MaxEventBytes int
}

// withDefaults fills the zero values that stand for a default.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.SweepBatch == 0 {
		c.SweepBatch = defaultSweepBatch
	}
	if c.HangAfter == 0 {
		c.HangAfter = d.HangAfter
	}
	if c.HoldFor == 0 {
		c.HoldFor = d.HoldFor
	}
	if c.RetryAfterMax == 0 {
		c.RetryAfterMax = d.RetryAfterMax
	}
	if c.DisableAfter == 0 {
		c.DisableAfter = d.DisableAfter
	}
	if c.DisableMinAttempts == 0 {
		c.DisableMinAttempts = d.DisableMinAttempts
	}
	if c.Concurrency == 0 {
		c.Concurrency = defaultConcurrency
	}
	if c.EndpointConcurrency == 0 {
		c.EndpointConcurrency = defaultEndpointConcurrency
	}
	if c.MaxSubscriptionsPerTenant == 0 {
		c.MaxSubscriptionsPerTenant = defaultMaxSubscriptionsPerTenant
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = defaultMaxEventBytes
	}
	return c
}

// DefaultConfig is the documented default configuration (docs/webhooks.md).
// SendTimeout is the low end of the Standard Webhooks recommendation (15–30 s).
func DefaultConfig() Config {
	return Config{
		SendTimeout:   15 * time.Second,
		HangAfter:     2 * time.Second,
		HoldFor:       30 * time.Second,
		ClaimLease:    2 * time.Minute,
		SweepInterval: 5 * time.Second,
		RetrySchedule: []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute,
			2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour},
		RetryAfterMax:      time.Hour,
		DisableAfter:       5 * 24 * time.Hour,
		DisableMinAttempts: 10,
		Retention:          DefaultRetention,
	}
}

// minTakeWrite is the shortest bound a take's statement gets (takeWriteBound), pool wait included.
const minTakeWrite = 250 * time.Millisecond

// takeWriteBound is how long a take may spend writing before its send starts: half the lease's slack
// beyond the send timeout, at most groupcommit.WriteTimeout, so a lease counted from the take's now covers both.
func (c Config) takeWriteBound() time.Duration {
	return min(groupcommit.WriteTimeout, (c.ClaimLease-c.SendTimeout)/2)
}

// Validate refuses a configuration under which a claim could expire while its attempt runs.
func (c Config) Validate() error {
	var errs []error
	if c.SendTimeout <= 0 {
		errs = append(errs, errors.New("webhooks: SendTimeout must be positive"))
	}
	if c.ClaimLease < c.SendTimeout+2*minTakeWrite {
		errs = append(errs, fmt.Errorf("webhooks: ClaimLease (%v) must exceed SendTimeout (%v) by at least %v: "+
			"a take may spend half that margin (at most %v) writing before its send starts, and the lease must cover both",
			c.ClaimLease, c.SendTimeout, 2*minTakeWrite, groupcommit.WriteTimeout))
	}
	if c.SweepInterval <= 0 {
		errs = append(errs, errors.New("webhooks: SweepInterval must be positive"))
	}
	if c.HangAfter < 0 || c.HoldFor < 0 {
		errs = append(errs, errors.New("webhooks: HangAfter and HoldFor must not be negative"))
	}
	for i, d := range c.RetrySchedule {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("webhooks: RetrySchedule[%d] must be positive", i))
		}
	}
	if c.Retention < 0 || c.RetentionBatch < 0 {
		errs = append(errs, errors.New("webhooks: Retention and RetentionBatch must not be negative"))
	}
	if c.SweepBatch < 0 {
		errs = append(errs, errors.New("webhooks: SweepBatch must not be negative"))
	}
	if _, err := egress.NewPolicy(c.AllowPrivateTargets, c.AllowedTargets); err != nil {
		errs = append(errs, fmt.Errorf("webhooks: AllowedTargets: %w", err))
	}
	if _, err := ParseEgressProxy(c.EgressProxy); err != nil {
		errs = append(errs, fmt.Errorf("webhooks: EgressProxy: %w", err))
	}
	if c.RetryAfterMax < 0 {
		errs = append(errs, errors.New("webhooks: RetryAfterMax must not be negative"))
	}
	if c.DisableAfter < 0 {
		errs = append(errs, errors.New("webhooks: DisableAfter must not be negative"))
	}
	if c.Concurrency < 0 || c.Concurrency > messaging.MaxConcurrency {
		errs = append(errs, fmt.Errorf("webhooks: Concurrency must be 0..%d", messaging.MaxConcurrency))
	}
	if c.EndpointConcurrency < 0 {
		errs = append(errs, errors.New("webhooks: EndpointConcurrency must not be negative"))
	}
	if c.MaxSubscriptionsPerTenant < 0 {
		errs = append(errs, errors.New("webhooks: MaxSubscriptionsPerTenant must not be negative"))
	}
	if c.MaxEventBytes < 0 || c.MaxEventBytes > maxEventBytesLimit {
		errs = append(errs, fmt.Errorf("webhooks: MaxEventBytes must be 0..%d", maxEventBytesLimit))
	}
	if c.DisableMinAttempts < 0 {
		errs = append(errs, errors.New("webhooks: DisableMinAttempts must not be negative"))
	}
	return errors.Join(errs...)
}

// Module is the webhooks module.
type Module struct {
	cfg     Config
	service *Service
}

// New validates the configuration; dependencies arrive with Register.
func New(cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.RetrySchedule = append([]time.Duration(nil), cfg.RetrySchedule...)
	cfg.AllowedTargets = append([]string(nil), cfg.AllowedTargets...)
	return &Module{cfg: cfg}, nil
}

// Name implements module.Module.
func (m *Module) Name() string { return Name }

// Migrations implements module.Module.
func (m *Module) Migrations() fs.FS { return migrations.For(Name) }

// Register builds the service and declares routes, consumers and the sweep.
func (m *Module) Register(r *module.Registry) error {
	svc, err := NewService(m.cfg, r.DB, r.Events, r.Catalog(), r.Logger, r.Metrics)
	if err != nil {
		return err
	}
	if r.InstanceID != "" {
		svc.instance = r.InstanceID
	}
	svc.sealer = sealer{box: r.Secrets}
	r.SealedData(module.Resealer{Name: "webhooks.subscriptions", Reseal: svc.resealSubscriptions, KeyIDs: svc.sealedKeyIDs})
	r.Schedule(jobs.Schedule{Name: secretExpirySchedule, Interval: secretExpiryInterval, Run: svc.WipeExpiredSecrets})
	m.service = svc
	svc.traceAttempts(r.TracerProvider)
	r.Routes(func(api *httpapi.API) { mountRoutes(api, svc) })
	// Every public event of every module becomes a webhook event: no list here.
	r.PublicEvents(contract.Events...)
	r.SubscribePublicEvents(messaging.Subscription{Consumer: fanoutConsumer, Handle: svc.handleIntegrationEvent})
	r.Subscribe(messaging.Subscription{Consumer: deliveryConsumer, EventTypes: []string{contract.DeliveriesRequested, contract.DeliveryRequested},
		Concurrency: m.cfg.Concurrency, Handle: svc.handleDeliveryRequested})
	r.Schedule(jobs.Schedule{Name: sweepSchedule, Interval: m.cfg.SweepInterval, Run: svc.Sweep})
	r.Loop(module.Loop{Name: "webhooks opened keys", Run: func(ctx context.Context) error {
		return svc.opened.pruneLoop(ctx, openedPruneEvery, svc.now)
	}})
	r.Subscribe(messaging.Subscription{Consumer: tenantConsumer, EventTypes: []string{tenancy.EventEnabled}, Handle: svc.handleTenantEnabled})
	if err := m.registerLifecycle(r, svc); err != nil {
		return err
	}
	return m.registerProposals(r, svc)
}

// Service is the module's application service, available once Register ran (nil before).
func (m *Module) Service() *Service { return m.service }

// Service holds the module's use cases; every method joins the unit of work carried by ctx, if any.
type Service struct {
	cfg     Config
	db      *database.DB
	jobs    module.JobEnqueuer // bulk recovery's jobs; set by Register
	store   store
	events  module.EventPublisher
	catalog *module.Catalog
	targets egress.Policy
	sender  *sender
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time
	jitter  func(time.Duration) time.Duration
	tracer  trace.Tracer // nil: attempts record no span
	// instance names this replica in claims and attempts (module.Deps.InstanceID, else hostname:pid).
	instance   string
	gate       *sendGate
	handling   chan struct{}   // a place for each delivery being handled: Concurrency of them
	handlers   *warmGoroutines // the goroutines of a request message's deliveries
	terms      *termsCache
	sealer     sealer                                            // secrets and header values at rest; set by Register (none: stored as they are)
	takes      *groupcommit.Batcher[takeRequest, takeResult]     // the take of each handled request, batched
	outcomes   *groupcommit.Batcher[outcome, committed]          // the outcome of each send, batched
	ingests    *groupcommit.Batcher[ingestRequest, ingestResult] // events ingested outside a unit of work, batched
	putBacks   *groupcommit.Batcher[putBackRequest, bool]        // untaken claims released to wait, batched
	opened     *openedCache                                      // subscriptions' opened keys and headers, per row version
	filters    *programs                                         // compiled subscription filters, by expression
	transforms *programs                                         // compiled subscription transformations, by expression
}

// NewService wires the service; cfg must have passed Validate.
func NewService(cfg Config, db *database.DB, events module.EventPublisher, catalog *module.Catalog, log *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	switch {
	case catalog == nil:
		return nil, errors.New("webhooks: nil event catalog")
	case db == nil:
		return nil, errors.New("webhooks: nil database")
	case events == nil:
		return nil, errors.New("webhooks: nil event publisher")
	case log == nil:
		return nil, errors.New("webhooks: nil logger")
	case reg == nil:
		return nil, errors.New("webhooks: nil metrics registerer")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	targets, err := egress.NewPolicy(cfg.AllowPrivateTargets, cfg.AllowedTargets)
	if err != nil {
		return nil, fmt.Errorf("webhooks: AllowedTargets: %w", err)
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("webhooks: metrics: %w", err)
	}
	svc := &Service{
		cfg: cfg, db: db, store: store{db: db, holdFor: cfg.HoldFor, sendTimeout: cfg.SendTimeout}, events: events, catalog: catalog, targets: targets,
		sender: newSender(cfg.SendTimeout, targets, cfg.Concurrency, time.Now),
		log:    log, metrics: met, now: database.Now, jitter: jitter, instance: defaultInstance(),
		gate: newSendGate(cfg.Concurrency, cfg.EndpointConcurrency, time.Now), terms: &termsCache{}, opened: &openedCache{},
		filters: newPrograms(filterExpression, expressionCacheSize), transforms: newPrograms(transformExpression, expressionCacheSize),
		handling: make(chan struct{}, cfg.Concurrency), handlers: newWarmGoroutines(5 * time.Second),
	}
	proxy, _ := ParseEgressProxy(cfg.EgressProxy) // checked by Validate
	svc.sender.client.Transport = newEgressTransports(svc.sender.client.Transport.(*http.Transport), proxy, targets, cfg.SendTimeout)
	svc.sender.hangAfter = cfg.HangAfter
	svc.takes = groupcommit.New(takeBatch, svc.writeTakes)
	svc.takes.Split = groupcommit.OncePer(func(r takeRequest) uuid.UUID { return r.DeliveryID }) // a delivery once per batch
	svc.outcomes = groupcommit.New(outcomeBatch, svc.writeOutcomes)
	svc.ingests = groupcommit.New(ingestBatch, svc.writeIngests)
	svc.ingests.Split = groupcommit.OncePer(func(r ingestRequest) eventKey { return eventKey{r.tenant, r.in.ID} }) // an event once per batch
	svc.putBacks = groupcommit.New(putBackBatch, svc.writePutBacks)
	svc.putBacks.Split = groupcommit.OncePer(func(r putBackRequest) uuid.UUID { return r.id }) // a delivery once per batch
	return svc, nil
}

func defaultInstance() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}
