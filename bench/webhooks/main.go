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
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"time"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

type options struct {
	adminURL  string
	amqpURL   string
	binary    string
	replicas  int
	events    int
	fanout    int
	rate      int
	duration  time.Duration
	posters   int
	noPgbench bool
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
	flag.Parse()
	log.SetFlags(log.Ltime)

	ctx := context.Background()
	host, _ := os.Hostname()
	fmt.Printf("# webhooks benchmark — %s, %d CPUs, %s, %s\n\n", host, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("load average at start: %s\n\n", loadAverage())
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
	env, err := newEnvironment(ctx, o, bin)
	if err != nil {
		return err
	}
	defer env.close()

	if err := throughput(ctx, env, o); err != nil {
		return fmt.Errorf("throughput: %w", err)
	}
	if err := latency(ctx, env, o); err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	if !o.noPgbench {
		tps, err := benchenv.Pgbench(ctx, o.adminURL, nil)
		if err != nil {
			return fmt.Errorf("pgbench: %w", err)
		}
		fmt.Printf("## pgbench -N -c 8 -j 2 -T 10 (same run, replicas idle)\n\n%.0f tps\n\n", tps)
	}
	fmt.Printf("load average at end: %s\n", loadAverage())
	return nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) == 0 {
		return "?"
	}
	return string(b[:len(b)-1])
}
