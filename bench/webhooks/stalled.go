package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// stallEndpoints starts o.stalled loopback endpoints that accept requests and never answer, subscribes
// each to stalled.*, and posts stalled.tick events at o.stalledRate/s until the returned stop; it
// returns after a 5 s warm-up, so their sends hang when the latency run starts.
func stallEndpoints(ctx context.Context, e *environment, o options) (stop func(), err error) {
	// The healthy endpoint has answered before the others stall: the replicas know it as fast.
	if err := e.subscribe(ctx, "/latency", "latency.*"); err != nil {
		return nil, err
	}
	e.latencySubscribed = true
	for i := range 2 * len(e.apis) {
		if _, err := e.post(ctx, e.apis[i%len(e.apis)], "/events", map[string]any{"type": "latency.warmup", "data": map[string]any{}}); err != nil {
			return nil, err
		}
	}
	if err := waitFor(func() bool { return int(e.receiver.count.Load()) >= 2*len(e.apis) }, time.Minute); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	release := make(chan struct{})
	var requests atomic.Int64
	var servers []*http.Server
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select { // never answers: the sender's timeout ends it
		case <-release:
		case <-r.Context().Done():
		}
	})
	closeAll := func() {
		close(release)
		for _, s := range servers {
			_ = s.Close()
		}
	}
	for range o.stalled {
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			closeAll()
			return nil, err
		}
		s := &http.Server{Handler: hang, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, s)
		go func() { _ = s.Serve(l) }()
		if _, err := e.post(ctx, e.apis[0], "/subscriptions", map[string]any{"url": "http://" + l.Addr().String() + "/", "event_types": []string{"stalled.*"}}); err != nil {
			closeAll()
			return nil, err
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	posted := 0
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(max(1, o.stalledRate)))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if _, err := e.post(ctx, e.apis[i%len(e.apis)], "/events", map[string]any{"type": "stalled.tick", "data": map[string]any{"i": i}}); err == nil {
				posted++
			}
		}
	}()
	time.Sleep(5 * time.Second)
	fmt.Printf("## Fairness: %d endpoints that never answer, %d events/s fanned out to all of them (from 5 s before the latency run)\n\n",
		o.stalled, o.stalledRate)
	return func() {
		close(done)
		wg.Wait()
		fmt.Printf("stalled endpoints: %d events posted (%d deliveries), %d requests reached them\n\n", posted, posted*o.stalled, requests.Load())
		closeAll()
	}, nil
}
