package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

// fairnessRun is the setting of docs/performance.md#fairness: o.dead endpoints that accept the
// connection and never answer, one healthy endpoint, all subscribed to fair.*, spread over o.tenants
// tenants (the healthy endpoint is subscribed in each of them, the dead ones round-robin); events
// are posted at o.rate/s for o.duration, round-robin over the tenants and the replicas, open loop.
// It prints the healthy endpoint's event→delivered p50/p95/max (from the start of the POST to the
// first arrival) and the rate at which the API accepted the events.
func fairnessRun(ctx context.Context, e *environment, o options) error {
	tokens := []string{token}
	for i := 1; i < o.tenants; i++ {
		t, err := e.tenantToken(ctx, fmt.Sprintf("fair-%d", i))
		if err != nil {
			return fmt.Errorf("tenant %d: %w", i, err)
		}
		tokens = append(tokens, t)
	}
	for _, tok := range tokens {
		if _, err := e.postAs(ctx, e.apis[0], tok, "/api/v1/webhooks/subscriptions",
			map[string]any{"url": e.receiver.url + "/healthy", "event_types": []string{"fair.*", "warm.*"}}); err != nil {
			return err
		}
	}
	// The healthy endpoint answers before the dead ones exist: both replicas know it.
	for i := range 2 * len(e.apis) * len(tokens) {
		if _, err := e.postAs(ctx, e.apis[i%len(e.apis)], tokens[i%len(tokens)], "/api/v1/webhooks/events",
			map[string]any{"type": "warm.up", "data": map[string]any{}}); err != nil {
			return err
		}
	}
	if err := waitFor(func() bool { return int(e.receiver.count.Load()) >= 2*len(e.apis)*len(tokens) }, time.Minute); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	dead, err := startDead(ctx, o.dead)
	if err != nil {
		return err
	}
	defer dead.close()
	for i, url := range dead.urls {
		if _, err := e.postAs(ctx, e.apis[0], tokens[i%len(tokens)], "/api/v1/webhooks/subscriptions",
			map[string]any{"url": url, "event_types": []string{"fair.*"}}); err != nil {
			return err
		}
	}
	e.receiver.reset()
	log.Printf("replica 0 serves /metrics and /debug/pprof at %s", e.profiles)

	n := int(float64(o.rate) * o.duration.Seconds())
	sent, answered := make([]time.Time, n), make([]time.Time, n)
	ids := make([]string, n)
	interval := time.Second / time.Duration(o.rate)
	var wg sync.WaitGroup
	var failures atomic.Int64
	sem := make(chan struct{}, 256)
	load := benchenv.LoadAverage()
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
			out, err := e.postAs(ctx, e.apis[i%len(e.apis)], tokens[i%len(tokens)], "/api/v1/webhooks/events",
				map[string]any{"type": "fair.tick", "data": map[string]any{"i": i}})
			if err != nil {
				failures.Add(1)
				return
			}
			answered[i], ids[i] = time.Now(), decodeID(out)
		}()
	}
	wg.Wait()
	var lastAnswer time.Time
	for _, a := range answered {
		if a.After(lastAnswer) {
			lastAnswer = a
		}
	}
	accepted := float64(n-int(failures.Load())) / lastAnswer.Sub(start).Seconds()
	if err := waitFor(func() bool { return int(e.receiver.count.Load()) >= n-int(failures.Load()) }, 10*time.Minute); err != nil {
		return fmt.Errorf("%d of %d healthy deliveries arrived: %w", e.receiver.count.Load(), n, err)
	}
	var lat, ingest []time.Duration
	worst := make([]time.Duration, int(o.duration.Seconds())+1) // by the second the event was posted in
	for i, id := range ids {
		if at, ok := e.receiver.arrival(id); ok && id != "" {
			d := at.Sub(sent[i])
			lat = append(lat, d)
			ingest = append(ingest, answered[i].Sub(sent[i]))
			sec := min(len(worst)-1, int(sent[i].Sub(start).Seconds()))
			worst[sec] = max(worst[sec], d)
		}
	}
	if len(lat) == 0 {
		return fmt.Errorf("no healthy delivery matched its event")
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("## Fairness: %d dead endpoints over %d tenant(s), 1 healthy, %d events/s for %s\n\n", o.dead, len(tokens), o.rate, o.duration)
	fmt.Printf("| dead | tenants | healthy p50 | healthy p95 | healthy max | events accepted/s | POST failures | requests held by dead endpoints | load average at start |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %d | %s | %s | %s | %.1f | %d | %d | %s |\n\n", o.dead, len(tokens), ms(pct(.50)), ms(pct(.95)), ms(lat[len(lat)-1]),
		accepted, failures.Load(), dead.requests.Load(), load)
	sort.Slice(ingest, func(a, b int) bool { return ingest[a] < ingest[b] })
	fmt.Printf("POST→answered (ingestion): p50 %s, p95 %s\n", ms(ingest[len(ingest)/2]), ms(ingest[min(len(ingest)-1, len(ingest)*95/100)]))
	fmt.Print("slowest healthy delivery of the events posted in each second:")
	for _, w := range worst {
		fmt.Printf(" %s", ms(w))
	}
	fmt.Println()
	fmt.Println()
	printReplicaCounters(ctx, e, "keelson_webhooks_put_back_total", "keelson_webhooks_stale_requests_total",
		"keelson_webhooks_delivery_outcomes_total", "keelson_webhooks_endpoints_held_total")
	return nil
}

// tenantToken creates a tenant and a webhooks token of it through the admin API.
func (e *environment) tenantToken(ctx context.Context, name string) (string, error) {
	out, err := e.postAs(ctx, e.apis[0], token, "/api/v1/admin/tenants", map[string]any{"name": name})
	if err != nil {
		return "", err
	}
	var tenant struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &tenant); err != nil {
		return "", err
	}
	out, err = e.postAs(ctx, e.apis[0], token, "/api/v1/admin/tokens",
		map[string]any{"tenant": tenant.ID, "name": name, "scopes": []string{"webhooks:read", "webhooks:write"}})
	if err != nil {
		return "", err
	}
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(out, &tok); err != nil {
		return "", err
	}
	return tok.Token, nil
}

// deadEndpoints accept connections and requests and never answer.
type deadEndpoints struct {
	urls     []string
	servers  []*http.Server
	release  chan struct{}
	requests atomic.Int64
}

func startDead(ctx context.Context, n int) (*deadEndpoints, error) {
	d := &deadEndpoints{release: make(chan struct{})}
	hang := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		d.requests.Add(1)
		select { // never answers: the sender's timeout ends it
		case <-d.release:
		case <-r.Context().Done():
		}
	})
	for range n {
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			d.close()
			return nil, err
		}
		s := &http.Server{Handler: hang, ReadHeaderTimeout: 5 * time.Second}
		d.servers = append(d.servers, s)
		d.urls = append(d.urls, "http://"+l.Addr().String()+"/")
		go func() { _ = s.Serve(l) }()
	}
	return d, nil
}

func (d *deadEndpoints) close() {
	close(d.release)
	for _, s := range d.servers {
		_ = s.Close()
	}
}
