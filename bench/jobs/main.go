// Command jobs benchmarks Keelson's job queue beside River and pgbench on this machine's PostgreSQL:
// a burn-down of N no-op jobs and a fixed-duration insert-and-work run, each on a throwaway database.
//
//	cd bench/jobs && go run .
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

type options struct {
	adminURL  string
	jobs      int
	duration  time.Duration
	workers   int
	batch     int
	poll      time.Duration
	durable   bool
	skipRiver bool
	skipPGB   bool
	only      string
	rounds    int
}

func main() {
	var o options
	flag.StringVar(&o.adminURL, "admin-url", envOr("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "server used to create and drop throwaway databases")
	flag.IntVar(&o.jobs, "jobs", 100_000, "jobs in the burn-down")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "length of the insert-and-work run")
	flag.IntVar(&o.workers, "workers", 200, "worker goroutines, the same for Keelson and River")
	flag.IntVar(&o.batch, "batch", 200, "Keelson claim batch size")
	flag.DurationVar(&o.poll, "poll", 20*time.Millisecond, "poll interval (Keelson PollInterval, River FetchPollInterval)")
	flag.BoolVar(&o.durable, "durable-claims", false, "Keelson claims and heartbeats with synchronous_commit on")
	flag.BoolVar(&o.skipRiver, "skip-river", false, "skip River")
	flag.BoolVar(&o.skipPGB, "skip-pgbench", false, "skip pgbench")
	flag.StringVar(&o.only, "only", "", "run only burndown or continuous")
	flag.IntVar(&o.rounds, "rounds", 1, "alternate Keelson and River this many times; the summary takes each one's median")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, o options) error {
	fmt.Printf("machine: %d CPUs, %s; jobs=%d duration=%s workers=%d keelson batch=%d durable-claims=%v poll=%s\n",
		runtime.NumCPU(), serverVersion(ctx, o.adminURL), o.jobs, o.duration, o.workers, o.batch, o.durable, o.poll)
	var results []result
	add := func(r result, err error) error {
		if err != nil {
			return err
		}
		fmt.Printf("  %-10s %-11s %8d jobs in %7.2fs = %8.0f jobs/s\n", r.system, r.mode, r.jobs, r.elapsed.Seconds(), r.rate())
		results = append(results, r)
		return nil
	}
	for round := 1; round <= max(o.rounds, 1); round++ {
		if o.rounds > 1 {
			fmt.Printf("round %d\n", round)
		}
		if o.only != "continuous" {
			if err := add(keelsonBurndown(ctx, o)); err != nil {
				return err
			}
			if !o.skipRiver {
				if err := add(riverBurndown(ctx, o)); err != nil {
					return err
				}
			}
		}
		if o.only != "burndown" {
			if err := add(keelsonContinuous(ctx, o)); err != nil {
				return err
			}
			if !o.skipRiver {
				if err := add(riverContinuous(ctx, o)); err != nil {
					return err
				}
			}
		}
	}
	var tps float64
	if !o.skipPGB {
		var err error
		if tps, err = pgbenchN(ctx, o); err != nil {
			return err
		}
		fmt.Printf("  pgbench -N -c 8 -j 2 -T 10: %.0f tps\n", tps)
	}
	fmt.Println("\nsummary (median of each system's rounds)")
	for _, mode := range []string{"burn-down", "continuous"} {
		k, r := median(results, "keelson", mode), median(results, "river", mode)
		if k == 0 {
			continue
		}
		line := fmt.Sprintf("  %-11s keelson %8.0f jobs/s", mode, k)
		if r > 0 {
			line += fmt.Sprintf("  river %8.0f jobs/s  keelson/river %.2f", r, k/r)
		}
		if tps > 0 {
			line += fmt.Sprintf("  keelson/pgbench-N %.2f", k/tps)
		}
		fmt.Println(line)
	}
	return nil
}

type result struct {
	system, mode string
	jobs         int
	elapsed      time.Duration
}

func (r result) rate() float64 { return float64(r.jobs) / r.elapsed.Seconds() }

func median(results []result, system, mode string) float64 {
	var rates []float64
	for _, r := range results {
		if r.system == system && r.mode == mode {
			rates = append(rates, r.rate())
		}
	}
	if len(rates) == 0 {
		return 0
	}
	sort.Float64s(rates)
	if len(rates)%2 == 1 {
		return rates[len(rates)/2]
	}
	return (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
}

func serverVersion(ctx context.Context, adminURL string) string {
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "unknown server"
	}
	defer c.Close(ctx)
	var v string
	_ = c.QueryRow(ctx, "SHOW server_version").Scan(&v)
	return "PostgreSQL " + v
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
