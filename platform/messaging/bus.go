package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// Bus runs, in every replica, the relay's forwarders (outbox → RabbitMQ) and the consumers
// (RabbitMQ → module handlers). Events enter the outbox through outbox.Publisher.
type Bus struct {
	cfg     Config
	relay   Relay
	logger  *slog.Logger
	wlogger watermill.LoggerAdapter
	metrics *metrics
	// stopping is set once Run begins to stop its components (stopAwareLogger).
	stopping atomic.Bool
	subs     []Subscription

	pubBroker *broker // forwarders and dead-lettering
	subBroker *broker // consumers, so publisher flow control never stalls them

	ready   chan struct{}
	runOnce sync.Once
}

// New checks cfg and the subscriptions and registers the metrics; it does not connect. relay is
// the outbox the bus forwards from (outbox.NewRelay).
func New(cfg Config, relay Relay, logger *slog.Logger, reg prometheus.Registerer, subs []Subscription) (*Bus, error) {
	if relay == nil || logger == nil || reg == nil {
		return nil, errors.New("messaging: nil relay, logger or metrics registerer")
	}
	cfg = cfg.withDefaults()
	if err := errors.Join(cfg.validate(), validateSubscriptions(subs)); err != nil {
		return nil, fmt.Errorf("messaging: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("messaging: metrics: %w", err)
	}
	for _, s := range subs { // exported at zero from start, before the consumers run
		m.handled.WithLabelValues(s.Consumer)
		m.failed.WithLabelValues(s.Consumer)
		m.deadLettered.WithLabelValues(s.Consumer)
	}
	logger = logger.With("component", "messaging")
	b := &Bus{
		cfg:     cfg,
		relay:   relay,
		logger:  logger,
		metrics: m,
		subs:    append([]Subscription(nil), subs...),

		pubBroker: newBroker(cfg.AMQPURL, "keelson-forwarder"),
		subBroker: newBroker(cfg.AMQPURL, "keelson-consumer"),
		ready:     make(chan struct{}),
	}
	b.wlogger = stopAwareLogger{stopping: &b.stopping,
		LoggerAdapter: watermill.NewSlogLoggerWithLevelMapping(logger, map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug})}
	return b, nil
}

// Ready is closed once the topology is declared and forwarders and consumers are running.
func (b *Bus) Ready() <-chan struct{} { return b.ready }

// Ping reports whether RabbitMQ answers, for /readyz.
func (b *Bus) Ping(ctx context.Context) error { return b.pubBroker.ping(ctx) }

// Run declares the topology (retrying until RabbitMQ answers), then forwards and consumes until ctx
// is done, then stops gracefully: forwarders and consumers in parallel (a forward in flight
// completes; in-flight handlers get Config.ShutdownTimeout, after which their messages return to
// the queue), then the publishers and connections. Run may be called once.
func (b *Bus) Run(ctx context.Context) error {
	err := errors.New("messaging: Run called twice")
	b.runOnce.Do(func() { err = b.run(ctx) })
	return err
}

func (b *Bus) run(ctx context.Context) error {
	defer func() {
		_ = b.pubBroker.close()
		_ = b.subBroker.close()
	}()
	if err := b.declareUntilDone(ctx); err != nil {
		return nil // ctx ended before RabbitMQ answered: nothing was started
	}

	out := newConfirmPublisher(b.pubBroker, b.cfg.Exchange, b.cfg.PublishTimeout, b.metrics.observeForward)
	dead := newConfirmPublisher(b.pubBroker, "", b.cfg.PublishTimeout, nil)
	defer func() {
		_ = out.Close()
		_ = dead.Close()
	}()
	fwds, err := b.relay.Forwarders(ForwardOptions{Out: out, Logger: b.wlogger, Count: b.cfg.Forwarders,
		BatchSize: b.cfg.ForwardBatchSize, PollInterval: b.cfg.PollInterval, PublishTimeout: b.cfg.PublishTimeout,
		CloseTimeout: b.cfg.ShutdownTimeout})
	if err != nil {
		return fmt.Errorf("messaging: relay: %w", err)
	}
	var router *message.Router
	var sub *queueSubscriber
	if !b.cfg.ForwardOnly && len(b.subs) > 0 {
		sub = newQueueSubscriber(b.subBroker, b.logger, b.cfg.ShutdownTimeout)
		if router, err = newConsumerRouter(b.cfg, b.subs, sub, dead, b.metrics, b.logger, b.wlogger); err != nil {
			return err
		}
	}

	// Components run on their own context and are stopped by Close, so stopping is graceful.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	g, gctx := errgroup.WithContext(runCtx)
	// started[i] is closed once component i runs or its Run has returned: only then may it be closed.
	var started []<-chan struct{}
	launch := func(running chan struct{}, run func(context.Context) error) {
		returned := make(chan struct{})
		g.Go(func() error { defer close(returned); return run(gctx) })
		started = append(started, either(running, returned))
	}
	for _, f := range fwds {
		launch(f.Running(), f.Run)
	}
	if router != nil {
		launch(router.Running(), router.Run)
	}
	g.Go(func() error { b.sampleBacklog(gctx); return nil })
	b.waitRunning(ctx, fwds, router)
	close(b.ready)
	b.logger.Info("messaging bus running", "exchange", b.cfg.Exchange, "consumers", len(b.subs),
		"forwarders", len(fwds), "forward_only", b.cfg.ForwardOnly)

	select {
	case <-ctx.Done():
	case <-gctx.Done(): // a component stopped on its own
	}
	b.logger.Info("messaging bus stopping")
	b.stopping.Store(true)
	// A watermill router closed before its Run has subscribed waits its whole CloseTimeout for
	// handlers that never start, then fails with "router close timeout": a SIGTERM that arrives
	// while the bus is still starting made an idle replica exit 1 after 25 s.
	for _, s := range started {
		<-s
	}
	// Forwarders and consumers stop in parallel, so the whole stop takes about ShutdownTimeout.
	var (
		closing sync.WaitGroup
		mu      sync.Mutex
		errs    []error
	)
	stop := func(what string, close func() error) {
		closing.Add(1)
		go func() {
			defer closing.Done()
			if err := close(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("close %s: %w", what, err))
				mu.Unlock()
			}
		}()
	}
	for _, f := range fwds {
		stop("forwarder", f.Close)
	}
	if router != nil {
		stop("consumers", func() error {
			// The subscriber first: the router closes it only on some paths, and it lets in-flight messages settle.
			subErr := sub.Close()
			return errors.Join(router.Close(), subErr)
		})
	}
	closing.Wait()
	cancelRun()
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, err)
	}
	b.logger.Info("messaging bus stopped")
	return errors.Join(errs...)
}

// either is closed once a or b is.
func either(a, b <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		defer close(out)
		select {
		case <-a:
		case <-b:
		}
	}()
	return out
}

// declareUntilDone retries the topology declaration with backoff: RabbitMQ may start after us.
func (b *Bus) declareUntilDone(ctx context.Context) error {
	wait := 200 * time.Millisecond
	for {
		err := declareTopology(ctx, b.pubBroker, b.cfg, b.subs)
		if err == nil {
			return nil
		}
		b.logger.Warn("declaring RabbitMQ topology failed, retrying", "error", err, "wait", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func (b *Bus) waitRunning(ctx context.Context, fwds []Forwarder, router *message.Router) {
	for _, f := range fwds {
		select {
		case <-f.Running():
		case <-ctx.Done():
			return
		}
	}
	if router != nil {
		select {
		case <-router.Running():
		case <-ctx.Done():
		}
	}
}

// sampleBacklog refreshes the backlog gauge until ctx is done.
func (b *Bus) sampleBacklog(ctx context.Context) {
	t := time.NewTicker(b.cfg.BacklogInterval)
	defer t.Stop()
	for {
		if n, err := b.relay.Backlog(ctx); err == nil {
			b.metrics.backlog.Set(float64(n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
