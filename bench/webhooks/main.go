// Command webhooks measures webhook delivery end to end on this machine: two `serve` replicas of
// ./app on one fresh database and one broker, a local receiver, then
//
//   - throughput: a burst of events fanned out to several subscriptions, deliveries/s at the receiver;
//
//   - latency: events posted at a steady rate to one subscription, event→delivered p50/p95/p99;
//
//   - pgbench -N in the same run, for the machine's PostgreSQL ceiling.
//
//     go run ./bench/webhooks [-replicas 2] [-events 2000] [-fanout 10] [-rate 200] [-for 20s]
//
// With -stalled N, N more endpoints that never answer receive -stalled-rate events/s each from 5 s
// before the latency run to its end: the latency figures are then the healthy endpoint's (fairness).
//
//	go run ./bench/webhooks -events 0 -rate 50 -for 20s -stalled 100 -send-timeout 10s -no-pgbench
//
// Add -before BIN -rounds N to alternate that run between two builds and print them side by side.
//
// With -fairness, the setting of docs/performance.md#fairness: -dead endpoints that accept the
// connection and never answer and one healthy endpoint, all subscribed to every event, spread over
// -tenants tenants; events at -rate/s for -for; it prints the healthy endpoint's p50/p95/max and
// the rate the API accepted the events at (compare with -dead 0):
//
//	go run ./bench/webhooks -fairness -dead 50 -tenants 1 -rate 100 -for 10s -send-timeout 10s
//
// With -warmup N, N burst events are delivered and the database ANALYZEd before the measured burst.
// With -profile DIR, the burst also yields PostgreSQL's statements (pg_stat_statements: the server
// needs shared_preload_libraries='pg_stat_statements', so point -pg at such a cluster), commits and
// WAL per delivery, and a CPU profile of replica 0 (pprof if it serves one, else perf):
//
//	go run ./bench/webhooks -pg postgres://postgres@127.0.0.1:5433/postgres -warmup 200 -profile /tmp/prof
//
// With -peer convoy, rounds of Keelson and of Convoy alternate (K, C, K, C) with the same burst,
// warm-up, ANALYZE and steady rate, pgbench after each pair, and one table at the end. Convoy is
// not part of this repository: build it from its source and pass the binary; redis-server must be
// on PATH (see docs/performance.md#benchwebhooks):
//
//	go run ./bench/webhooks -peer convoy -convoy-bin /tmp/convoy -rounds 2 -warmup 200
//
// With -before BIN, every round also runs that keelson binary first (before/after a change).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

type options struct {
	adminURL     string
	amqpURL      string
	binary       string
	replicas     int
	events       int
	fanout       int
	filter       string
	filterRounds int
	rate         int
	duration     time.Duration
	posters      int
	noPgbench    bool

	stalled     int           // endpoints that never answer, subscribed to stalled.* (0 = none)
	stalledRate int           // events/s to them during the latency run
	sendTimeout time.Duration // WEBHOOKS_SEND_TIMEOUT of the replicas (0 = the default)

	fairness bool // the fairness run alone (fairnessRun)
	dead     int  // its endpoints that never answer
	tenants  int  // the tenants they are spread over

	warmup     int           // burst events delivered, then ANALYZE, before the measured burst
	profileDir string        // where -profile writes pg_stat_statements and the replica's CPU profile ("" = no profile)
	profileFor time.Duration // length of the replica's CPU profile

	peer      string // "convoy": alternate Keelson and Convoy rounds
	convoyBin string // Convoy's binary, built from its source outside this repository
	rounds    int    // rounds of the side-by-side run
	beforeBin string // another Keelson binary measured in every round before -bin
}

func main() {
	var o options
	flag.StringVar(&o.adminURL, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL admin URL (a throwaway database is created and dropped)")
	flag.StringVar(&o.amqpURL, "amqp", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ URL")
	flag.StringVar(&o.binary, "bin", "", "keelson binary (default: go build ./app into a temporary directory)")
	flag.IntVar(&o.replicas, "replicas", 2, "serve processes")
	flag.IntVar(&o.events, "events", 2000, "events of the throughput burst")
	flag.IntVar(&o.fanout, "fanout", 10, "subscriptions every burst event is delivered to")
	flag.IntVar(&o.rate, "rate", 200, "events/s of the latency run")
	flag.DurationVar(&o.duration, "for", 20*time.Second, "duration of the latency run")
	flag.IntVar(&o.posters, "posters", 16, "concurrent HTTP clients posting events")
	flag.BoolVar(&o.noPgbench, "no-pgbench", false, "skip pgbench")
	flag.IntVar(&o.stalled, "stalled", 0, "endpoints that never answer, fed -stalled-rate events/s during the latency run (fairness)")
	flag.IntVar(&o.stalledRate, "stalled-rate", 5, "events/s fanned out to every stalled endpoint")
	flag.DurationVar(&o.sendTimeout, "send-timeout", 0, "WEBHOOKS_SEND_TIMEOUT of the replicas (default: the app's)")
	flag.BoolVar(&o.fairness, "fairness", false, "run only the fairness setting: -dead hanging endpoints and one healthy one over -tenants tenants, -rate events/s for -for")
	flag.IntVar(&o.dead, "dead", 50, "endpoints that never answer in the -fairness run")
	flag.IntVar(&o.tenants, "tenants", 1, "tenants the -fairness run's endpoints are spread over")
	flag.IntVar(&o.warmup, "warmup", 0, "burst events delivered before the measured burst, followed by ANALYZE")
	flag.StringVar(&o.profileDir, "profile", "", "during the throughput burst, write pg_stat_statements (server needs shared_preload_libraries) and a replica CPU profile (if served) to this directory")
	flag.DurationVar(&o.profileFor, "profile-for", 12*time.Second, "length of the replica CPU profile")
	flag.StringVar(&o.peer, "peer", "", `"convoy": alternate rounds of Keelson and Convoy (needs -convoy-bin and redis-server) and print them side by side`)
	flag.StringVar(&o.convoyBin, "convoy-bin", "", "Convoy's binary for -peer convoy")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds of -peer (each: Keelson, the peer, pgbench)")
	flag.StringVar(&o.beforeBin, "before", "", "another keelson binary (the code before a change): rounds alternate it with -bin (and -peer)")
	flag.StringVar(&o.filter, "filter", "", `a subscription filter (CEL): a burst to -fanout endpoints without it, then one to endpoints with it (every event passes), compared; e.g. -filter 'data.amount > 100 && data.currency == "EUR"'`)
	flag.IntVar(&o.filterRounds, "filter-rounds", 3, "rounds of the -filter comparison (each: one burst per group, alternating which goes first)")
	flag.Parse()
	log.SetFlags(log.Ltime)

	ctx := context.Background()
	benchenv.Header("webhooks")
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, o options) error {
	bin, cleanup, err := binary(ctx, o.binary)
	if err != nil {
		return err
	}
	defer cleanup()
	switch o.peer {
	case "":
	case "convoy":
		if o.convoyBin == "" {
			return fmt.Errorf("-peer convoy needs -convoy-bin")
		}
	default:
		return fmt.Errorf("unknown -peer %q", o.peer)
	}
	if o.fairness {
		env, err := newEnvironment(ctx, o, bin)
		if err != nil {
			return err
		}
		defer env.close()
		err = fairnessRun(ctx, env, o)
		fmt.Printf("load average at end: %s\n", benchenv.LoadAverage())
		return err
	}
	if o.stalled > 0 && o.peer != "" {
		return fmt.Errorf("-stalled compares Keelson builds (-before), not a peer")
	}
	if o.peer != "" || o.beforeBin != "" {
		err := sideBySide(ctx, o, bin)
		fmt.Printf("load average at end: %s\n", benchenv.LoadAverage())
		return err
	}
	env, err := newEnvironment(ctx, o, bin)
	if err != nil {
		return err
	}
	defer env.close()

	if o.events > 0 {
		if _, err := throughput(ctx, env, o); err != nil {
			return fmt.Errorf("throughput: %w", err)
		}
	}
	if o.filter != "" {
		if err := filterCost(ctx, env, o); err != nil {
			return fmt.Errorf("filter: %w", err)
		}
	}
	stop := func() {}
	if o.stalled > 0 {
		if stop, err = stallEndpoints(ctx, env, o); err != nil {
			return fmt.Errorf("stalled endpoints: %w", err)
		}
	}
	_, err = latency(ctx, env, o)
	stop()
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	printReplicaCounters(ctx, env, "keelson_webhooks_put_back_total", "keelson_webhooks_stale_requests_total", "keelson_webhooks_delivery_outcomes_total")
	if !o.noPgbench {
		tps, err := benchenv.Pgbench(ctx, o.adminURL, nil)
		if err != nil {
			return fmt.Errorf("pgbench: %w", err)
		}
		fmt.Printf("## pgbench -N -c 8 -j 2 -T 10 (same run, replicas idle)\n\n%.0f tps\n\n", tps)
	}
	fmt.Printf("load average at end: %s\n", benchenv.LoadAverage())
	return nil
}
