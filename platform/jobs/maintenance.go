package jobs

import (
	"context"
	"time"
)

const pruneBatch = 5000

// pruneSchedule deletes finished jobs older than Retention, once at a time across replicas.
func (r *Runner) pruneSchedule() Schedule {
	return Schedule{
		Name:     "jobs.prune",
		Interval: r.cfg.PruneInterval,
		Run: func(ctx context.Context) error {
			var total int64
			for {
				n, err := r.store.prune(ctx, r.cfg.Retention, pruneBatch)
				total += n
				if err != nil {
					return err
				}
				if n < pruneBatch {
					r.log.Debug("jobs: pruned finished jobs", "deleted", total)
					return nil
				}
			}
		},
	}
}

// sampleDepth refreshes the depth-by-status gauge until ctx ends.
func (r *Runner) sampleDepth(ctx context.Context) {
	tick := time.NewTicker(r.cfg.DepthInterval)
	defer tick.Stop()
	for {
		counts, err := r.store.depth(ctx)
		if err == nil {
			for _, st := range allStatuses() {
				r.metrics.depth.WithLabelValues(string(st)).Set(counts[st])
			}
		} else if ctx.Err() == nil {
			r.log.Warn("jobs: depth sample failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
