package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// InstrumentationName names Keelson's tracers.
const InstrumentationName = "github.com/keelson/keelson"

// Propagator reads and writes W3C trace context (traceparent, tracestate) and baggage: on HTTP
// requests, in outbox rows and in AMQP headers.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(
	propagation.TraceContext{}, propagation.Baggage{})

// Tracing is the process's tracer provider and how to flush it at exit.
type Tracing struct {
	Provider trace.TracerProvider
	// Enabled is false when no exporter is configured: Provider is then a no-op that only passes on
	// the trace context it is given (so logs still carry an incoming trace id).
	Enabled  bool
	shutdown func(context.Context) error
}

// Shutdown flushes spans not yet exported; a no-op without an exporter.
func (t Tracing) Shutdown(ctx context.Context) error {
	if t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Disabled is tracing without an exporter.
func Disabled() Tracing { return Tracing{Provider: noop.NewTracerProvider()} }

// NewTracing reads the standard OTEL_* variables through getenv. Spans are exported over OTLP/HTTP
// only when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set and
// OTEL_TRACES_EXPORTER is not "none"; the exporter itself reads the other OTEL_EXPORTER_OTLP_*
// variables, the sampler OTEL_TRACES_SAMPLER(_ARG), the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
func NewTracing(ctx context.Context, getenv func(string) string) (Tracing, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	endpoint := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) + strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if exporter == "none" || endpoint == "" {
		return Disabled(), nil
	}
	if exporter != "" && exporter != "otlp" {
		return Tracing{}, fmt.Errorf("OTEL_TRACES_EXPORTER %q: only otlp or none", exporter)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return Tracing{}, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "keelson")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the name above
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
	)
	if err != nil {
		return Tracing{}, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return Tracing{Provider: tp, Enabled: true, shutdown: tp.Shutdown}, nil
}

// OrNoop returns tp, or a no-op provider when tp is nil.
func OrNoop(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return noop.NewTracerProvider()
	}
	return tp
}

// Inject writes the trace context of ctx into carrier (outbox metadata, AMQP headers, a job row).
func Inject(ctx context.Context, carrier map[string]string) {
	Propagator.Inject(ctx, propagation.MapCarrier(carrier))
}

// Extract returns ctx carrying the trace context found in carrier.
func Extract(ctx context.Context, carrier map[string]string) context.Context {
	return Propagator.Extract(ctx, propagation.MapCarrier(carrier))
}

func spanIDs(ctx context.Context) (traceID, spanID string, ok bool) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", "", false
	}
	return sc.TraceID().String(), sc.SpanID().String(), true
}

// Traceparent is the W3C traceparent of the span in ctx, or "" when ctx carries none: a job row
// keeps only this (no tracestate or baggage), and a context without a span costs no allocation.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte // "00-" 32 hex "-" 16 hex "-" 2 hex
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:3], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// WithTraceparent returns ctx carrying the remote span context a Traceparent wrote; ctx unchanged
// when traceparent is empty or malformed.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, traceparentCarrier(traceparent))
}

// traceparentCarrier is a carrier holding only a traceparent.
type traceparentCarrier string

func (c traceparentCarrier) Get(key string) string {
	if key == "traceparent" {
		return string(c)
	}
	return ""
}
func (traceparentCarrier) Set(string, string) {}
func (traceparentCarrier) Keys() []string     { return []string{"traceparent"} }
