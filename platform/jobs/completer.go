package jobs

import (
	"context"
	"time"
)

// completeLoop writes completions in batches: one owner-checked UPDATE for up to CompleteBatch jobs,
// flushed when the batch is full or CompleteFlush after its first job.
func (r *Runner) completeLoop(in <-chan fence, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	batch := make([]fence, 0, r.cfg.CompleteBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func() {
		timer.Stop()
		if len(batch) > 0 {
			r.writeCompletions(batch)
			batch = batch[:0]
		}
	}
	for {
		select {
		case f := <-in:
			if len(batch) == 0 {
				timer.Reset(r.cfg.CompleteFlush)
			}
			batch = append(batch, f)
			if len(batch) >= r.cfg.CompleteBatch {
				flush()
			}
		case <-timer.C:
			flush()
		case <-stop:
			for {
				select {
				case f := <-in:
					batch = append(batch, f)
					if len(batch) >= r.cfg.CompleteBatch {
						flush()
					}
				default:
					flush()
					return
				}
			}
		}
	}
}

// writeCompletions retries a failing write a few times; after that the leases expire and the jobs
// run again elsewhere (at-least-once), which beats blocking every worker behind a dead database.
func (r *Runner) writeCompletions(batch []fence) {
	delay := 50 * time.Millisecond
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ours, err := r.store.complete(ctx, batch)
		cancel()
		if err == nil {
			for _, f := range batch {
				if !ours[f.id] {
					r.metrics.lostLeases.Inc()
					r.log.Warn("jobs: completion not recorded: the job is no longer ours", "job", f.id, "attempt", f.attempt)
				}
			}
			return
		}
		if try == 5 {
			r.log.Error("jobs: completions lost; the jobs will run again after their lease", "jobs", len(batch), "err", err)
			return
		}
		r.log.Warn("jobs: completion write failed; retrying", "jobs", len(batch), "err", err)
		time.Sleep(delay)
		delay *= 2
	}
}
