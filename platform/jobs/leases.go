package jobs

import (
	"context"
	"time"
)

// keepLeases renews, in one owner-checked UPDATE per tick, the leases of claims past half their lease.
// A claim the UPDATE no longer matches was taken over: its job's context is cancelled.
func (r *Runner) keepLeases(ctx context.Context) {
	tick := time.NewTicker(r.cfg.Lease / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		var due []fence
		r.mu.Lock()
		for _, ent := range r.inflight {
			if ent.leaseUntil.Sub(now) < r.cfg.Lease/2 {
				due = append(due, ent.fence)
			}
		}
		r.mu.Unlock()
		if len(due) == 0 {
			continue
		}
		sent := time.Now()
		extendCtx, cancel := context.WithTimeout(ctx, r.cfg.Lease/4)
		ours, err := r.store.extend(extendCtx, due)
		cancel()
		if err != nil {
			r.log.Warn("jobs: lease renewal failed; will retry", "jobs", len(due), "err", err)
			continue
		}
		r.mu.Lock()
		for _, f := range due {
			ent, ok := r.inflight[f.id]
			if !ok || ent.attempt != f.attempt {
				continue // finished meanwhile
			}
			if ours[f.id] {
				ent.leaseUntil = sent.Add(r.cfg.Lease)
				ent.watchdog.Reset(time.Until(ent.leaseUntil))
				continue
			}
			delete(r.inflight, f.id)
			ent.watchdog.Stop()
			ent.cancel(errLeaseLost)
			r.metrics.lostLeases.Inc()
			r.log.Warn("jobs: lease lost to another worker; the job is cancelled here", "job", f.id, "attempt", f.attempt)
		}
		r.mu.Unlock()
	}
}
