package groupcommit

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestAnUntracedBatcherIgnoresItsCallersSpansAndAllocatesNothingForThem(t *testing.T) {
	write := func(_ context.Context, reqs []int) ([]int, error) { return reqs, nil }
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	inSpan, span := tp.Tracer("test").Start(context.Background(), "caller")
	defer span.End()
	per := func(b *Batcher[int, int], ctx context.Context) float64 {
		return testing.AllocsPerRun(1000, func() {
			if _, err := b.Do(ctx, 1); err != nil {
				t.Fatal(err)
			}
		})
	}
	untraced := New(64, write)
	bare, spanned := per(untraced, context.Background()), per(untraced, inSpan)
	traced := New(64, write)
	traced.Traced(tp.Tracer("test"), "batch")
	withSpans := per(traced, inSpan)
	t.Logf("allocations per request: %.1f untraced, %.1f untraced in a caller's span, %.1f traced", bare, spanned, withSpans)
	require.Equal(t, bare, spanned, "tracing off: a caller's span costs the batcher nothing")
	require.Greater(t, withSpans, bare, "tracing on: the batch's span and links")
}
