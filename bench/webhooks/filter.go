package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// filterResult is one burst of the filter comparison.
type filterResult struct {
	acceptedPerSec, deliveriesPerSec, appMSPerEvent float64
}

// filterCost measures what a content filter costs at fan-out: bursts of o.events events, each to
// o.fanout endpoints, in the same environment; the first group's endpoints have no filter, the
// second's each carry o.filter, which every event passes (so both deliver the same number). The
// filter runs while an event is ingested, so events accepted per second is the fan-out's rate.
func filterCost(ctx context.Context, e *environment, o options) error {
	groups := []struct{ name, filter string }{{"plain", ""}, {"filtered", o.filter}}
	for _, g := range groups {
		for i := range o.fanout {
			body := map[string]any{"url": fmt.Sprintf("%s/%s/%d", e.receiver.url, g.name, i), "event_types": []string{g.name + ".*"}}
			if g.filter != "" {
				body["filter"] = g.filter
			}
			if _, err := e.post(ctx, e.apis[0], "/subscriptions", body); err != nil {
				return err
			}
		}
	}
	// Rounds alternate which group goes first, so warm-up and a neighbour's load fall on both; each
	// figure is the median of its group's rounds.
	runs := make([][]filterResult, len(groups))
	for round := range o.filterRounds {
		for k := range groups {
			i := (k + round) % len(groups)
			res, err := filterBurst(ctx, e, o, groups[i].name)
			if err != nil {
				return fmt.Errorf("%s burst: %w", groups[i].name, err)
			}
			runs[i] = append(runs[i], res)
		}
	}
	results := make([]filterResult, len(groups))
	for i, rs := range runs {
		results[i] = filterResult{
			acceptedPerSec:   median(rs, func(r filterResult) float64 { return r.acceptedPerSec }),
			deliveriesPerSec: median(rs, func(r filterResult) float64 { return r.deliveriesPerSec }),
			appMSPerEvent:    median(rs, func(r filterResult) float64 { return r.appMSPerEvent }),
		}
	}
	plain, filtered := results[0], results[1]
	fmt.Printf("## Content filter at fan-out: %d events × %d endpoints, each endpoint's filter `%s` (median of %d rounds)\n\n",
		o.events, o.fanout, o.filter, o.filterRounds)
	fmt.Printf("| measure | no filter | filter | filter / none |\n|---|---|---|---|\n")
	fmt.Printf("| events accepted (fanned out) | %.0f /s | %.0f /s | %.2f |\n", plain.acceptedPerSec, filtered.acceptedPerSec, filtered.acceptedPerSec/plain.acceptedPerSec)
	fmt.Printf("| deliveries at the receiver | %.0f /s | %.0f /s | %.2f |\n", plain.deliveriesPerSec, filtered.deliveriesPerSec, filtered.deliveriesPerSec/plain.deliveriesPerSec)
	fmt.Printf("| CPU per event, keelson processes | %.3f ms | %.3f ms | %+.3f ms (%d filters each) |\n\n", plain.appMSPerEvent, filtered.appMSPerEvent,
		filtered.appMSPerEvent-plain.appMSPerEvent, o.fanout)
	return nil
}

// filterBurst posts o.events events of group as fast as the API takes them and waits for their deliveries.
func filterBurst(ctx context.Context, e *environment, o options, group string) (filterResult, error) {
	r := e.rcv()
	r.reset()
	want := int64(o.events * o.fanout)
	before := e.cpu(ctx)
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.posters)
	for p := range o.posters {
		wg.Go(func() {
			for next.Add(1) <= int64(o.events) {
				data := map[string]any{"p": p, "amount": 150, "currency": "EUR", "customer": map[string]any{"tier": "gold", "country": "DE"}}
				if _, err := e.publish(ctx, p, group, group+".created", data); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	posted := time.Since(start)
	select {
	case err := <-errs:
		return filterResult{}, err
	default:
	}
	if err := waitFor(func() bool { return r.count.Load() >= want }, 10*time.Minute); err != nil {
		return filterResult{}, fmt.Errorf("%d of %d deliveries arrived: %w", r.count.Load(), want, err)
	}
	after := e.cpu(ctx)
	first, last := r.window()
	return filterResult{
		acceptedPerSec:   float64(o.events) / posted.Seconds(),
		deliveriesPerSec: float64(want) / last.Sub(first).Seconds(),
		appMSPerEvent:    1000 * (after.app - before.app) / float64(o.events),
	}, nil
}

func median(rs []filterResult, f func(filterResult) float64) float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}
