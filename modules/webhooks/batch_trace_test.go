package webhooks

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestBatchedTakesAndOutcomesAreSpansLinkedToTheSpanOfEveryDeliveryInTheirBatch(t *testing.T) {
	const n = 20
	h := newHarness(t, testConfig(), harnessOptions{})
	recorder, tp := h.recordSpans()
	// A receiver that takes a moment keeps concurrent sends together, so their outcomes share batches.
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	})
	// One event to n subscriptions: n deliveries, each to an endpoint of its own, so no send waits at the send gate.
	for range n {
		h.subscribe(rc.URL, "order.*")
	}
	h.publish("order.created", map[string]any{"n": 1})
	requests := h.deliveryRequests()
	require.Len(t, requests, n)

	// Each request is handled inside a span of its own, as the consumer's "process" span would be.
	handled := make([]trace.SpanContext, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, r := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, span := tp.Tracer("test").Start(tenantContext(), "handle request")
			defer span.End()
			handled[i] = span.SpanContext()
			<-start
			errs[i] = h.svc.handleDeliveryRequested(ctx, requestEvent(t, r))
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "request %d", i)
	}
	require.Equal(t, n, rc.count())

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range recorder.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	// linkedFrom counts, per span, the batch spans of one name that link to it, and checks each is a root.
	linkedFrom := func(name string) (map[trace.SpanID]int, int) {
		counts, size := map[trace.SpanID]int{}, 0
		for _, s := range byName[name] {
			require.False(t, s.Parent().IsValid(), "%s is a root: one batch serves many traces", name)
			for _, kv := range s.Attributes() {
				if kv.Key == "keelson.webhook.batch_size" {
					size += int(kv.Value.AsInt64())
				}
			}
			for _, l := range s.Links() {
				counts[l.SpanContext.SpanID()]++
			}
		}
		return counts, size
	}
	takes, taken := linkedFrom("webhooks take batch")
	require.Equal(t, n, taken, "every request's take was in one batch")
	for i, sc := range handled {
		require.Equal(t, 1, takes[sc.SpanID()], "request %d: one take batch links to its span", i)
	}
	// An outcome is recorded from inside its attempt's span, a child of the request's.
	outcomes, recorded := linkedFrom("webhooks outcome batch")
	require.Equal(t, n, recorded, "every outcome was in one batch")
	attempts := byName["webhook attempt"]
	require.Len(t, attempts, n)
	parents := map[trace.SpanID]bool{}
	for _, sc := range handled {
		parents[sc.SpanID()] = true
	}
	for _, a := range attempts {
		require.True(t, parents[a.Parent().SpanID()], "an attempt span is a child of its request's span")
		require.Equal(t, 1, outcomes[a.SpanContext().SpanID()], "one outcome batch links to attempt %s", a.SpanContext().SpanID())
	}
	t.Logf("%d requests: %d take batches, %d outcome batches", n, len(byName["webhooks take batch"]), len(byName["webhooks outcome batch"]))
}
