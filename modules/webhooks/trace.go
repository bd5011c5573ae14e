package webhooks

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceAttempts records a "webhook attempt" span per send, with the HTTP client span inside it, and
// a span per batched take and outcome statement linked to the spans of the requests in the batch.
// Nothing is propagated to the receiver: Keelson's trace ids are its own, not its customers'.
func (s *Service) traceAttempts(tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	s.tracer = tp.Tracer("github.com/keelson/keelson/modules/webhooks")
	s.takes.Traced(s.tracer, "webhooks take batch")
	s.outcomes.Traced(s.tracer, "webhooks outcome batch")
	s.ingests.Traced(s.tracer, "webhooks ingest batch")
	s.sender.client.Transport = otelhttp.NewTransport(s.sender.client.Transport,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()), // no traceparent to customers
		otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return "webhook POST" }))
}

func (s *Service) startAttempt(ctx context.Context, d *Delivery) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, nil
	}
	return s.tracer.Start(ctx, "webhook attempt", trace.WithAttributes(
		attribute.String("keelson.webhook.delivery_id", d.ID.String()),
		attribute.String("keelson.webhook.subscription_id", d.SubscriptionID.String()),
		attribute.String("keelson.webhook.event_type", d.EventType),
		attribute.Int("keelson.webhook.attempt", d.AttemptCount), // the take counted it
	))
}

func endAttempt(span trace.Span, res sendResult) {
	if span == nil {
		return
	}
	defer span.End()
	status := "succeeded"
	if !res.Succeeded() {
		status = "failed"
		span.SetStatus(codes.Error, res.ErrorClass)
	}
	span.SetAttributes(attribute.String("keelson.webhook.status", status),
		attribute.Int("http.response.status_code", res.StatusCode),
		attribute.String("keelson.webhook.error_class", res.ErrorClass))
}
