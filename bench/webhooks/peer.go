package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

// roundResult is one system's figures in one round of the side-by-side run.
type roundResult struct {
	system    string
	round     int
	load      string
	tput      throughputResult
	lat       latencyResult
	pgbenchTP float64
}

// sideBySide alternates, for o.rounds rounds, Keelson before (-before), Keelson and the peer
// (-peer), each on a fresh database with the same warm-up, ANALYZE, burst and steady rate, and runs
// pgbench after each round; then it prints one table.
func sideBySide(ctx context.Context, o options, bin string) error {
	var results []roundResult
	for round := 1; round <= o.rounds; round++ {
		systems := []string{"Keelson", "Convoy"}
		if o.beforeBin != "" {
			systems = []string{"Keelson before", "Keelson", "Convoy"}
		}
		if o.peer == "" {
			systems = systems[:len(systems)-1]
		}
		for _, which := range systems {
			load := benchenv.LoadAverage()
			fmt.Printf("# round %d, %s (load average %s)\n\n", round, which, load)
			r, err := oneRound(ctx, o, bin, which, round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, which, err)
			}
			r.round, r.load = round, load
			results = append(results, r)
		}
		if o.noPgbench {
			continue
		}
		tps, err := benchenv.Pgbench(ctx, o.adminURL, nil)
		if err != nil {
			return fmt.Errorf("pgbench: %w", err)
		}
		fmt.Printf("## pgbench -N -c 8 -j 2 -T 10 after round %d\n\n%.0f tps\n\n", round, tps)
		for i := len(results) - len(systems); i < len(results); i++ {
			results[i].pgbenchTP = tps
		}
	}
	fmt.Printf("## Side by side: %d events × %d endpoints, then %d events/s for %s to one endpoint\n\n", o.events, o.fanout, o.rate, o.duration)
	fmt.Println("| round | system | load average at its start | events/s accepted | deliveries/s | CPU per delivery: service / PostgreSQL / Redis | p50 / p95 / p99 at the steady rate | pgbench -N tps of the round | deliveries/s ÷ tps |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		redis := "—"
		if r.system == "Convoy" {
			redis = fmt.Sprintf("%.2f", r.tput.otherMS)
		}
		// A fairness run has no burst (-events 0) and may skip pgbench: those columns are dashes.
		accepted, delivered, cpu, tps, ratio := "—", "—", "— / — / —", "—", "—"
		if o.events > 0 {
			accepted, delivered = fmt.Sprintf("%.0f", r.tput.acceptedPerSec), fmt.Sprintf("%.0f", r.tput.deliveriesPerSec)
			cpu = fmt.Sprintf("%.2f / %.2f / %s", r.tput.appMS, r.tput.postgresMS, redis)
		}
		if r.pgbenchTP > 0 {
			tps = fmt.Sprintf("%.0f", r.pgbenchTP)
			if o.events > 0 {
				ratio = fmt.Sprintf("%.2f", r.tput.deliveriesPerSec/r.pgbenchTP)
			}
		}
		fmt.Printf("| %d | %s | %s | %s | %s | %s ms | %s / %s / %s | %s | %s |\n",
			r.round, r.system, strings.Join(strings.Fields(r.load)[:3], " "), accepted, delivered,
			cpu, ms(r.lat.p50), ms(r.lat.p95), ms(r.lat.p99), tps, ratio)
	}
	fmt.Println()
	return nil
}

func oneRound(ctx context.Context, o options, bin, which string, round int) (roundResult, error) {
	res := roundResult{system: which}
	var s system
	var closeFn func()
	if which != "Convoy" {
		if which == "Keelson before" {
			bin = o.beforeBin
		}
		e, err := newEnvironment(ctx, o, bin)
		if err != nil {
			return res, err
		}
		s, closeFn = e, e.close
	} else {
		c, err := newConvoy(ctx, o)
		if err != nil {
			return res, err
		}
		s, closeFn = c, c.close
	}
	defer closeFn()
	po := o
	if o.profileDir != "" {
		po.profileDir = fmt.Sprintf("%s/%s-%d", o.profileDir, strings.ReplaceAll(strings.ToLower(which), " ", "-"), round)
	}
	var err error
	if o.events > 0 {
		if res.tput, err = throughput(ctx, s, po); err != nil {
			return res, fmt.Errorf("throughput: %w", err)
		}
	}
	stop := func() {}
	if env, ok := s.(*environment); ok && o.stalled > 0 { // the fairness run: run checks that no peer is in it
		if stop, err = stallEndpoints(ctx, env, o); err != nil {
			return res, fmt.Errorf("stalled endpoints: %w", err)
		}
	}
	res.lat, err = latency(ctx, s, o)
	stop()
	if err != nil {
		return res, fmt.Errorf("latency: %w", err)
	}
	return res, nil
}
