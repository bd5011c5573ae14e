package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelson/keelson/bench/internal/benchenv"
	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/outbox"
)

// endToEnd measures the production path: outbox.Publisher in a unit of work, the Bus forwarding
// with publisher confirms, a consumer on RabbitMQ.
func endToEnd(ctx context.Context, o options) error {
	dbURL, drop, err := benchenv.Throwaway(ctx, o.adminURL, "keelson_bench_e2e")
	if err != nil {
		return err
	}
	defer drop()
	db, err := database.Open(ctx, database.Config{URL: dbURL, MaxOpenConns: 40})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := database.Migrate(ctx, db.SQL(), []database.MigrationSet{{Owner: "platform", FS: migrations.For("platform")}}); err != nil {
		return err
	}
	relay, err := outbox.NewRelay(db)
	if err != nil {
		return err
	}
	pub, err := outbox.NewPublisher(db, relay)
	if err != nil {
		return err
	}
	e := &e2e{o: o, db: db, relay: relay, pub: pub}

	fmt.Printf("## End to end (outbox.Publisher → Bus forwarders, confirms on → RabbitMQ → consumer)\n\n")
	fmt.Printf("Defaults: PollInterval 20ms, Forwarders 2, ForwardBatchSize 100.\n\n")

	idle, err := e.latencyRun(ctx, 0, false)
	if err != nil {
		return err
	}
	fmt.Printf("- idle, one event every 20 ms: %s\n", idle)
	loaded, err := e.latencyRun(ctx, o.loadRate, false)
	if err != nil {
		return err
	}
	fmt.Printf("- under load, %d events/s offered for %s by 4 writers: %s\n", o.loadRate, o.loadFor, loaded)
	pg, err := e.latencyRun(ctx, o.loadRate, true)
	if err != nil {
		return err
	}
	fmt.Printf("- under load + pgbench -N -c 8 -j 2 running (%.0f tps during the run): %s\n\n", e.lastPgbenchTPS, pg)

	idleTx, err := e.idlePolling(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("- idle bus (2 forwarders, 20 ms): %.0f transactions/s on its database from polling\n\n", idleTx)

	fmt.Printf("Forwarder throughput, confirms on: %d events pre-filled in the outbox, then the bus starts.\n\n", o.drainN)
	fmt.Printf("| Forwarders | forwarded (outbox → confirmed → deleted) | consumed |\n|---|---|---|\n")
	for _, n := range o.forwarders {
		fwd, cons, err := e.drainRun(ctx, n)
		if err != nil {
			return err
		}
		fmt.Printf("| %d | %.0f msg/s | %.0f msg/s |\n", n, fwd, cons)
	}
	fmt.Printf("\nRabbitMQ alone (amqp091, persistent messages to a durable queue, each publisher waits for every confirm):\n")
	for _, n := range []int{1, 4} {
		raw, err := rawConfirmRate(ctx, o.amqpURL, n, 2000)
		if err != nil {
			return err
		}
		fmt.Printf("%d publisher(s): %.0f msg/s; ", n, raw)
	}
	fmt.Println()
	fmt.Println()
	return nil
}

type e2e struct {
	o              options
	db             *database.DB
	relay          *outbox.Relay
	pub            *outbox.Publisher
	lastPgbenchTPS float64
}

type benchBus struct {
	bus    *messaging.Bus
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
	cfg    messaging.Config
}

func (e *e2e) startBus(ctx context.Context, forwarders int, handle messaging.Handler) (*benchBus, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	cfg := messaging.Config{
		AMQPURL:     e.o.amqpURL,
		Exchange:    "bench.events." + id,
		QueuePrefix: "bench." + id,
		Forwarders:  forwarders,
	}
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	bus, err := messaging.New(cfg, e.relay, logger, reg, []messaging.Subscription{{Consumer: "bench", EventTypes: []string{"bench.#"}, Handle: handle}})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	bb := &benchBus{bus: bus, reg: reg, cancel: cancel, done: make(chan error, 1), cfg: cfg}
	go func() { bb.done <- bus.Run(runCtx) }()
	select {
	case <-bus.Ready():
	case err := <-bb.done:
		return nil, fmt.Errorf("bus stopped: %w", err)
	}
	return bb, nil
}

func (bb *benchBus) stop(amqpURL string) {
	bb.cancel()
	if err := <-bb.done; err != nil {
		fmt.Println("bus stopped with:", err)
	}
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	_, _ = ch.QueueDelete(bb.cfg.QueuePrefix+".bench", false, false, false)
	_, _ = ch.QueueDelete(bb.cfg.QueuePrefix+".bench.dead", false, false, false)
	_ = ch.ExchangeDelete(bb.cfg.Exchange, false, false)
}

func (bb *benchBus) forwarded() float64 {
	families, _ := bb.reg.Gather()
	for _, f := range families {
		if f.GetName() == "keelson_outbox_forwarded_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// publish commits one unit of work with events and records their commit time.
func (e *e2e) publish(ctx context.Context, lat *latencies, n int) ([]string, error) {
	events := make([]messaging.Event, 0, n)
	for range n {
		ev, err := messaging.NewEvent(ctx, "bench", "bench.created", map[string]string{"k": "v"})
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	if err := e.db.WithTx(ctx, func(ctx context.Context) error { return e.pub.Publish(ctx, events...) }); err != nil {
		return nil, err
	}
	now := time.Now()
	ids := make([]string, 0, n)
	for _, ev := range events {
		if lat != nil {
			lat.commit(ev.ID, now)
		}
		ids = append(ids, ev.ID)
	}
	return ids, nil
}

// latencyRun measures commit→consumer latency: rate 0 is idle (one event every 20 ms), otherwise 4
// writers offer rate events/s for loadFor, optionally with pgbench running.
func (e *e2e) latencyRun(ctx context.Context, rate int, withPgbench bool) (summary, error) {
	lat := newLatencies()
	bb, err := e.startBus(ctx, 0, func(_ context.Context, ev messaging.Event) error { lat.receive(ev.ID); return nil })
	if err != nil {
		return summary{}, err
	}
	defer bb.stop(e.o.amqpURL)

	var pgDone chan error
	if withPgbench {
		started := make(chan struct{})
		pgDone = make(chan error, 1)
		go func() {
			tps, err := benchenv.Pgbench(ctx, e.o.adminURL, started)
			e.lastPgbenchTPS = tps
			pgDone <- err
		}()
		<-started
	}

	var ids []string
	if rate == 0 {
		for range e.o.idleN {
			got, err := e.publish(ctx, lat, 1)
			if err != nil {
				return summary{}, err
			}
			ids = append(ids, got...)
			time.Sleep(20 * time.Millisecond)
		}
	} else {
		const writers = 4
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		interval := time.Duration(float64(time.Second) * writers / float64(rate))
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := time.NewTicker(interval)
				defer t.Stop()
				end := time.Now().Add(e.o.loadFor)
				for time.Now().Before(end) {
					<-t.C
					got, err := e.publish(ctx, lat, 1)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					ids = append(ids, got...)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return summary{}, err
		}
		log.Printf("offered %d events in %s (%.0f/s)", len(ids), e.o.loadFor, float64(len(ids))/e.o.loadFor.Seconds())
	}
	if err := lat.wait(ids, 2*time.Minute); err != nil {
		return summary{}, err
	}
	if pgDone != nil {
		if err := <-pgDone; err != nil {
			return summary{}, err
		}
	}
	return lat.summarize(ids), nil
}

// drainRun pre-fills the outbox, starts a bus with the given forwarders and times the drain.
func (e *e2e) drainRun(ctx context.Context, forwarders int) (forwarded, consumed float64, err error) {
	var ids []string
	for done := 0; done < e.o.drainN; done += 100 {
		got, err := e.publish(ctx, nil, min(100, e.o.drainN-done))
		if err != nil {
			return 0, 0, err
		}
		ids = append(ids, got...)
	}
	lat := newLatencies()
	start := time.Now()
	bb, err := e.startBus(ctx, forwarders, func(_ context.Context, ev messaging.Event) error { lat.receive(ev.ID); return nil })
	if err != nil {
		return 0, 0, err
	}
	defer bb.stop(e.o.amqpURL)
	var fwdTook time.Duration
	for fwdTook == 0 || lat.count() < len(ids) {
		if fwdTook == 0 && bb.forwarded() >= float64(len(ids)) {
			fwdTook = time.Since(start)
		}
		if time.Since(start) > 5*time.Minute {
			return 0, 0, fmt.Errorf("drain stuck: forwarded %v, consumed %d", bb.forwarded(), lat.count())
		}
		time.Sleep(2 * time.Millisecond)
	}
	consTook := time.Since(start)
	log.Printf("forwarders=%d forwarded %d in %s, consumed in %s, %d duplicate deliveries", forwarders, len(ids), fwdTook.Round(time.Millisecond), consTook.Round(time.Millisecond), lat.dups)
	return float64(len(ids)) / fwdTook.Seconds(), float64(len(ids)) / consTook.Seconds(), nil
}

// idlePolling counts the transactions an idle bus commits per second on its database.
func (e *e2e) idlePolling(ctx context.Context) (float64, error) {
	bb, err := e.startBus(ctx, 0, func(context.Context, messaging.Event) error { return nil })
	if err != nil {
		return 0, err
	}
	defer bb.stop(e.o.amqpURL)
	xacts := func() (int64, error) {
		var n int64
		err := e.db.Gorm().Raw(`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n).Error
		return n, err
	}
	time.Sleep(time.Second)
	before, err := xacts()
	if err != nil {
		return 0, err
	}
	const window = 5 * time.Second
	time.Sleep(window)
	after, err := xacts()
	if err != nil {
		return 0, err
	}
	return float64(after-before) / window.Seconds(), nil
}
