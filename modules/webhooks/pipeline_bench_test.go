package webhooks

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPipeline runs events through the whole path in one process — fan-out, outbox, RabbitMQ,
// consumer, HTTP to a local receiver — for CPU profiles; bench/webhooks measures the real deployment.
func BenchmarkPipeline(b *testing.B) {
	const fanout = 5
	h := newHarness(b, testConfig(), harnessOptions{bus: true})
	rc := newReceiver(b, nil)
	for range fanout {
		h.subscribe(rc.URL, "*")
	}
	ctx := tenantContext()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := h.svc.PublishEvent(ctx, EventInput{Type: "bench.event", Data: []byte(`{"k":"v"}`)}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Minute)
	for rc.count() < b.N*fanout {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d deliveries", rc.count(), b.N*fanout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.ReportMetric(float64(b.N*fanout)/b.Elapsed().Seconds(), "deliveries/s")
}
