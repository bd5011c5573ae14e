package jobs

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/telemetry"
)

// spanNamed waits for a span of that name in the exporter and returns it.
func spanNamed(t *testing.T, exporter *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found tracetest.SpanStub
	waitFor(t, 30*time.Second, "a span named "+name, func() bool {
		for _, s := range exporter.GetSpans() {
			if s.Name == name {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

func TestAJobEnqueuedInATraceRunsInASpanChildOfTheEnqueuingSpan(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	db := dbtest.Create(t).Open(t)
	client := newClient(t, db)

	ctx, request := tp.Tracer("test").Start(systemCtx(), "request")
	traced, err := client.Enqueue(ctx, "traced", nil, EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	request.End()
	if _, err := client.Enqueue(systemCtx(), "untraced", nil, EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}

	noop := func(context.Context, Job) error { return nil }
	r := newTestRunner(t, db, Config{InstanceID: "tracer", TracerProvider: tp, DepthInterval: -1},
		[]Kind{{Name: "traced", Handle: noop}, {Name: "untraced", Handle: noop}}, nil)
	startRunner(t, r)

	job := spanNamed(t, exporter, "traced run")
	want := request.SpanContext()
	if job.SpanContext.TraceID() != want.TraceID() || job.Parent.SpanID() != want.SpanID() {
		t.Fatalf("job span in trace %s under %s, want trace %s under %s",
			job.SpanContext.TraceID(), job.Parent.SpanID(), want.TraceID(), want.SpanID())
	}
	if got := attr(job, "keelson.job.id"); got != traced.ID.String() {
		t.Errorf("keelson.job.id = %q, want %s", got, traced.ID)
	}
	if other := spanNamed(t, exporter, "untraced run"); other.Parent.IsValid() {
		t.Errorf("a job enqueued outside any trace got parent %s", other.Parent.SpanID())
	}
}

func TestEachScheduleRunIsARootSpanOfItsOwn(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	db := dbtest.Create(t).Open(t)

	r := newTestRunner(t, db, Config{InstanceID: "scheduler", TracerProvider: tp, DepthInterval: -1}, nil,
		[]Schedule{{Name: "test.sweep", Interval: time.Hour, Run: func(context.Context) error { return nil }}})
	startRunner(t, r)

	run := spanNamed(t, exporter, "test.sweep run")
	if run.Parent.IsValid() {
		t.Errorf("the schedule run has parent %s, want a root span", run.Parent.SpanID())
	}
}

func TestWithoutATraceTheTraceparentCostsNoAllocation(t *testing.T) {
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { _ = telemetry.Traceparent(ctx) }); n != 0 {
		t.Errorf("Traceparent of an untraced context: %v allocations", n)
	}
	if got := telemetry.Traceparent(telemetry.WithTraceparent(ctx, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("round trip: %q", got)
	}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
