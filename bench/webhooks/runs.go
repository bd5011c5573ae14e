package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// throughput posts a burst of events, each matching o.fanout subscriptions, as fast as the API takes
// them, and measures deliveries/s at the receiver from the first to the last delivery.
func throughput(ctx context.Context, e *environment, o options) error {
	for i := range o.fanout {
		if err := e.subscribe(ctx, fmt.Sprintf("/burst/%d", i), "burst.*"); err != nil {
			return err
		}
	}
	if err := warmUp(ctx, e, o); err != nil {
		return err
	}
	var prof *profiler
	if o.profileDir != "" {
		var err error
		if prof, err = newProfiler(ctx, o.profileDir, e.dbURL, e.apis[0], e.procs[0].Process.Pid, o.profileFor); err != nil {
			return err
		}
		if err := prof.start(ctx); err != nil {
			return err
		}
	}
	e.receiver.reset()
	want := int64(o.events * o.fanout)
	cpuBefore := e.cpu(ctx)
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.posters)
	for p := range o.posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := e.apis[p%len(e.apis)]
			for next.Add(1) <= int64(o.events) {
				if _, err := e.post(ctx, api, "/events", map[string]any{"type": "burst.created", "data": map[string]any{"p": p}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	posted := time.Since(start)
	select {
	case err := <-errs:
		return err
	default:
	}
	if err := waitFor(func() bool { return e.receiver.count.Load() >= want }, 10*time.Minute); err != nil {
		return fmt.Errorf("%d of %d deliveries arrived: %w", e.receiver.count.Load(), want, err)
	}
	total := time.Since(start)
	cpuAfter := e.cpu(ctx)
	first, last := e.receiver.window()
	fmt.Printf("## Throughput: %d events × %d subscriptions = %d deliveries, %d replicas\n\n", o.events, o.fanout, want, o.replicas)
	fmt.Printf("| measure | value |\n|---|---|\n")
	fmt.Printf("| events accepted by the API | %.0f events/s (%d posters) |\n", float64(o.events)/posted.Seconds(), o.posters)
	fmt.Printf("| deliveries at the receiver, first → last | %.0f deliveries/s |\n", float64(want)/last.Sub(first).Seconds())
	fmt.Printf("| deliveries, first POST → last delivery | %.0f deliveries/s (%.1f s) |\n", float64(want)/total.Seconds(), total.Seconds())
	fmt.Printf("| CPU per delivery, replicas (ingestion included) | %.2f ms |\n", 1000*(cpuAfter.app-cpuBefore.app)/float64(want))
	fmt.Printf("| CPU per delivery, PostgreSQL backends of the run (pooled connections) | %.2f ms |\n\n", 1000*(cpuAfter.postgres-cpuBefore.postgres)/float64(want))
	if prof != nil {
		return prof.report(ctx, want)
	}
	return nil
}

// warmUp delivers o.warmup burst events (connections, caches and plans warm, tables not empty),
// then runs ANALYZE so the measured burst starts from the same planner statistics every time.
func warmUp(ctx context.Context, e *environment, o options) error {
	if o.warmup <= 0 {
		return nil
	}
	e.receiver.reset()
	for i := range o.warmup {
		if _, err := e.post(ctx, e.apis[i%len(e.apis)], "/events", map[string]any{"type": "burst.warmup", "data": map[string]any{"i": i}}); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	if err := waitFor(func() bool { return e.receiver.count.Load() >= int64(o.warmup*o.fanout) }, 5*time.Minute); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return analyze(ctx, e.dbURL)
}

// latency posts events at o.rate to one subscription for o.duration and reports event→delivered
// latency: from just before the POST to the first arrival at the receiver.
func latency(ctx context.Context, e *environment, o options) error {
	if !e.latencySubscribed {
		if err := e.subscribe(ctx, "/latency", "latency.*"); err != nil {
			return err
		}
	}
	e.receiver.reset()
	n := int(float64(o.rate) * o.duration.Seconds())
	sent := make([]time.Time, n)
	ids := make([]string, n)
	interval := time.Second / time.Duration(o.rate)
	var wg sync.WaitGroup
	var failures atomic.Int64
	sem := make(chan struct{}, 64)
	start := time.Now()
	for i := range n {
		// Open loop: each event leaves at its planned time, whatever the previous ones do.
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sent[i] = time.Now()
			out, err := e.post(ctx, e.apis[i%len(e.apis)], "/events", map[string]any{"type": "latency.tick", "data": map[string]any{"i": i}})
			if err != nil {
				failures.Add(1)
				return
			}
			var body struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(out, &body)
			ids[i] = body.ID
		}()
	}
	wg.Wait()
	offered := time.Since(start)
	if err := waitFor(func() bool { return int(e.receiver.count.Load()) >= n-int(failures.Load()) }, 5*time.Minute); err != nil {
		return fmt.Errorf("%d of %d deliveries arrived: %w", e.receiver.count.Load(), n, err)
	}
	var lat []time.Duration
	for i, id := range ids {
		if id == "" {
			continue
		}
		if at, ok := e.receiver.arrival(id); ok {
			lat = append(lat, at.Sub(sent[i]))
		}
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("## Latency: %d events/s for %s to one subscription, %d replicas\n\n", o.rate, o.duration, o.replicas)
	fmt.Printf("offered %.0f events/s, %d delivered, %d POST failures\n\n", float64(n)/offered.Seconds(), len(lat), failures.Load())
	fmt.Printf("| event→delivered | p50 | p95 | p99 | max |\n|---|---|---|---|---|\n")
	fmt.Printf("| | %s | %s | %s | %s |\n\n", ms(pct(.50)), ms(pct(.95)), ms(pct(.99)), ms(lat[len(lat)-1]))
	return nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
}

func waitFor(cond func() bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}
