package main

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// latencies records commit and receive times per message id.
type latencies struct {
	mu        sync.Mutex
	committed map[string]time.Time
	received  map[string]time.Time
	dups      int
}

func newLatencies() *latencies {
	return &latencies{committed: map[string]time.Time{}, received: map[string]time.Time{}}
}

func (l *latencies) commit(id string, at time.Time) {
	l.mu.Lock()
	l.committed[id] = at
	l.mu.Unlock()
}

func (l *latencies) receive(id string) {
	now := time.Now()
	l.mu.Lock()
	if _, ok := l.received[id]; ok {
		l.dups++
	} else {
		l.received[id] = now
	}
	l.mu.Unlock()
}

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.received)
}

// wait blocks until every id in ids was received, or timeout.
func (l *latencies) wait(ids []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		missing := 0
		for _, id := range ids {
			if _, ok := l.received[id]; !ok {
				missing++
			}
		}
		l.mu.Unlock()
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d messages missing after %s", missing, len(ids), timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type summary struct {
	n             int
	p50, p99, max time.Duration
}

func (s summary) String() string {
	return fmt.Sprintf("n=%d p50=%s p99=%s max=%s", s.n, ms(s.p50), ms(s.p99), ms(s.max))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

// summarize computes commit→receive percentiles over ids.
func (l *latencies) summarize(ids []string) summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for _, id := range ids {
		c, ok1 := l.committed[id]
		r, ok2 := l.received[id]
		if ok1 && ok2 {
			ds = append(ds, r.Sub(c))
		}
	}
	if len(ds) == 0 {
		return summary{}
	}
	slices.Sort(ds)
	pct := func(p float64) time.Duration { return ds[min(len(ds)-1, int(float64(len(ds))*p))] }
	return summary{n: len(ds), p50: pct(0.50), p99: pct(0.99), max: ds[len(ds)-1]}
}
