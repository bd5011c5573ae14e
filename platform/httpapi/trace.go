package httpapi

import (
	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/telemetry"
)

// tracing starts a server span per request named after its route template, child of the caller's
// traceparent. Without a provider it only takes the caller's trace context into the request's
// context, so logs and published events still carry the caller's trace id, at almost no cost.
func tracing(tp trace.TracerProvider) gin.HandlerFunc {
	if tp == nil {
		return func(c *gin.Context) {
			if c.GetHeader("traceparent") == "" {
				c.Next()
				return
			}
			ctx := telemetry.Propagator.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
			c.Request = c.Request.WithContext(ctx)
			c.Next()
		}
	}
	return otelgin.Middleware("keelson", otelgin.WithTracerProvider(tp), otelgin.WithPropagators(telemetry.Propagator))
}
