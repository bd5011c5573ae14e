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

// system is a webhook service under measurement: Keelson's replicas, or a peer driven through its own API.
type system interface {
	name() string
	rcv() *receiver
	// addEndpoint points one more endpoint at the receiver's path for the events of group (burst, latency).
	addEndpoint(ctx context.Context, group, path string) error
	// publish posts one event of group through API client number client and returns the key its
	// deliveries carry to the receiver (webhook-id or X-Bench-Id).
	publish(ctx context.Context, client int, group, eventType string, data map[string]any) (string, error)
	cpu(ctx context.Context) cpuSample
	database() string
	// profiled is the address serving /debug/pprof ("" if none) and the process a CPU profile samples.
	profiled() (api string, pid int)
}

// throughputResult is what the burst measured.
type throughputResult struct {
	acceptedPerSec, deliveriesPerSec, endToEndPerSec float64
	appMS, postgresMS, otherMS                       float64 // CPU per delivery
}

// latencyResult is event→delivered at the steady rate.
type latencyResult struct {
	p50, p95, p99, max time.Duration
	delivered, failed  int
}

// throughput posts a burst of events, each matching o.fanout endpoints, as fast as the API takes
// them, and measures deliveries/s at the receiver from the first to the last delivery.
func throughput(ctx context.Context, s system, o options) (throughputResult, error) {
	var res throughputResult
	for i := range o.fanout {
		if err := s.addEndpoint(ctx, "burst", fmt.Sprintf("/burst/%d", i)); err != nil {
			return res, err
		}
	}
	if err := warmUp(ctx, s, o); err != nil {
		return res, err
	}
	var prof *profiler
	if o.profileDir != "" {
		api, pid := s.profiled()
		var err error
		if prof, err = newProfiler(ctx, o.profileDir, s.database(), api, pid, o.profileFor); err != nil {
			return res, err
		}
		if err := prof.start(ctx); err != nil {
			return res, err
		}
	}
	r := s.rcv()
	r.reset()
	want := int64(o.events * o.fanout)
	cpuBefore := s.cpu(ctx)
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.posters)
	for p := range o.posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(o.events) {
				if _, err := s.publish(ctx, p, "burst", "burst.created", map[string]any{"p": p}); err != nil {
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
		return res, err
	default:
	}
	if err := waitFor(func() bool { return r.count.Load() >= want }, 10*time.Minute); err != nil {
		return res, fmt.Errorf("%d of %d deliveries arrived: %w", r.count.Load(), want, err)
	}
	total := time.Since(start)
	cpuAfter := s.cpu(ctx)
	first, last := r.window()
	res = throughputResult{
		acceptedPerSec:   float64(o.events) / posted.Seconds(),
		deliveriesPerSec: float64(want) / last.Sub(first).Seconds(),
		endToEndPerSec:   float64(want) / total.Seconds(),
		appMS:            1000 * (cpuAfter.app - cpuBefore.app) / float64(want),
		postgresMS:       1000 * (cpuAfter.postgres - cpuBefore.postgres) / float64(want),
		otherMS:          1000 * (cpuAfter.other - cpuBefore.other) / float64(want),
	}
	fmt.Printf("## Throughput (%s): %d events × %d endpoints = %d deliveries\n\n", s.name(), o.events, o.fanout, want)
	fmt.Printf("| measure | value |\n|---|---|\n")
	fmt.Printf("| events accepted by the API | %.0f events/s (%d posters) |\n", res.acceptedPerSec, o.posters)
	fmt.Printf("| deliveries at the receiver, first → last | %.0f deliveries/s |\n", res.deliveriesPerSec)
	fmt.Printf("| deliveries, first POST → last delivery | %.0f deliveries/s (%.1f s) |\n", res.endToEndPerSec, total.Seconds())
	fmt.Printf("| CPU per delivery, %s processes (ingestion included) | %.2f ms |\n", s.name(), res.appMS)
	fmt.Printf("| CPU per delivery, PostgreSQL backends of the run (pooled connections) | %.2f ms |\n", res.postgresMS)
	if cpuAfter.other > 0 {
		fmt.Printf("| CPU per delivery, Redis | %.2f ms |\n", res.otherMS)
	}
	fmt.Println()
	if prof != nil {
		return res, prof.report(ctx, want)
	}
	return res, nil
}

// warmUp delivers o.warmup burst events (connections, caches and plans warm, tables not empty),
// then runs ANALYZE so the measured burst starts from the same planner statistics every time.
func warmUp(ctx context.Context, s system, o options) error {
	if o.warmup <= 0 {
		return nil
	}
	r := s.rcv()
	r.reset()
	for i := range o.warmup {
		if _, err := s.publish(ctx, i, "burst", "burst.warmup", map[string]any{"i": i}); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	if err := waitFor(func() bool { return r.count.Load() >= int64(o.warmup*o.fanout) }, 5*time.Minute); err != nil {
		return fmt.Errorf("warm-up: %d of %d deliveries: %w", r.count.Load(), o.warmup*o.fanout, err)
	}
	return analyze(ctx, s.database())
}

// latency posts events at o.rate to one endpoint for o.duration and reports event→delivered
// latency: from just before the POST to the first arrival at the receiver.
func latency(ctx context.Context, s system, o options) (latencyResult, error) {
	var res latencyResult
	if k, ok := s.(*environment); !ok || !k.latencySubscribed {
		if err := s.addEndpoint(ctx, "latency", "/latency"); err != nil {
			return res, err
		}
	}
	r := s.rcv()
	r.reset()
	n := int(float64(o.rate) * o.duration.Seconds())
	sent, answered := make([]time.Time, n), make([]time.Time, n)
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
			id, err := s.publish(ctx, i, "latency", "latency.tick", map[string]any{"i": i})
			if err != nil {
				failures.Add(1)
				return
			}
			answered[i], ids[i] = time.Now(), id
		}()
	}
	wg.Wait()
	offered := time.Since(start)
	if err := waitFor(func() bool { return int(r.count.Load()) >= n-int(failures.Load()) }, 5*time.Minute); err != nil {
		return res, fmt.Errorf("%d of %d deliveries arrived: %w", r.count.Load(), n, err)
	}
	// The POST's answer splits the path: ingestion (the event's unit of work committed) and the rest
	// (outbox, broker, take, send), the second counted from the answer, or 0 if the send came first.
	var lat, ingest, after []time.Duration
	for i, id := range ids {
		if id == "" {
			continue
		}
		if at, ok := r.arrival(id); ok {
			lat = append(lat, at.Sub(sent[i]))
			ingest = append(ingest, answered[i].Sub(sent[i]))
			after = append(after, max(0, at.Sub(answered[i])))
		}
	}
	if len(lat) == 0 {
		return res, fmt.Errorf("no delivery of the latency run matched its event")
	}
	quantiles := func(d []time.Duration) (p50, p95, p99, top time.Duration) {
		sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
		pct := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
		return pct(.50), pct(.95), pct(.99), d[len(d)-1]
	}
	res.p50, res.p95, res.p99, res.max = quantiles(lat)
	res.delivered, res.failed = len(lat), int(failures.Load())
	fmt.Printf("## Latency (%s): %d events/s for %s to one endpoint\n\n", s.name(), o.rate, o.duration)
	fmt.Printf("offered %.0f events/s, %d delivered, %d POST failures\n\n", float64(n)/offered.Seconds(), res.delivered, res.failed)
	fmt.Printf("| | p50 | p95 | p99 | max |\n|---|---|---|---|---|\n")
	fmt.Printf("| event→delivered | %s | %s | %s | %s |\n", ms(res.p50), ms(res.p95), ms(res.p99), ms(res.max))
	for _, part := range []struct {
		name string
		d    []time.Duration
	}{{"POST→answered (ingestion)", ingest}, {"answered→delivered", after}} {
		p50, p95, p99, top := quantiles(part.d)
		fmt.Printf("| %s | %s | %s | %s | %s |\n", part.name, ms(p50), ms(p95), ms(p99), ms(top))
	}
	fmt.Println()
	return res, nil
}

// publishResponse is the part of Keelson's answer to POST /events the benchmark reads.
type publishResponse struct {
	ID string `json:"id"`
}

func decodeID(out []byte) string {
	var body publishResponse
	_ = json.Unmarshal(out, &body)
	return body.ID
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
