package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// receiver is the local webhook endpoint: it counts deliveries and remembers when each event first arrived.
type receiver struct {
	url    string
	server *http.Server

	count atomic.Int64
	mu    sync.Mutex
	first time.Time
	last  time.Time
	seen  map[string]time.Time // webhook-id → first arrival
}

func newReceiver(ctx context.Context) (*receiver, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + l.Addr().String(), seen: map[string]time.Time{}}
	r.server = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.server.Serve(l) }()
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	now := time.Now()
	id := req.Header.Get("webhook-id")
	if id == "" {
		id = req.Header.Get("X-Bench-Id") // the peer carries the key as a custom header
	}
	r.mu.Lock()
	if r.first.IsZero() {
		r.first = now
	}
	r.last = now
	if _, ok := r.seen[id]; !ok {
		r.seen[id] = now
	}
	r.mu.Unlock()
	r.count.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

// reset forgets everything received so far.
func (r *receiver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count.Store(0)
	r.first, r.last = time.Time{}, time.Time{}
	r.seen = map[string]time.Time{}
}

func (r *receiver) window() (first, last time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.last
}

func (r *receiver) arrival(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.seen[id]
	return t, ok
}

func (r *receiver) close() { _ = r.server.Close() }
