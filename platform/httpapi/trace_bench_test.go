package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/httpapi"
)

// discardExporter stands for a collector: spans are built, batched and handed over, then dropped.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkGetRoute times one authenticated GET through the whole engine (middleware, auth, JSON),
// without tracing and with an exporter configured; the figures are in
// docs/performance.md#request-path-tracing-tokens-tenant-filter.
func BenchmarkGetRoute(b *testing.B) {
	exporting := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	defer func() { _ = exporting.Shutdown(context.Background()) }()
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{{"tracing off", nil}, {"exporter configured", exporting}} {
		b.Run(tc.name, func(b *testing.B) {
			engine, api, err := httpapi.NewEngine(httpapi.Options{
				Logger:         slog.New(slog.NewJSONHandler(io.Discard, nil)),
				Tokens:         []string{token},
				Metrics:        prometheus.NewRegistry(),
				TracerProvider: tc.tp,
			})
			if err != nil {
				b.Fatal(err)
			}
			api.GET("/things/:id", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"id": c.Param("id"), "name": "thing"}) })
			req := httptest.NewRequest(http.MethodGet, "/api/v1/things/42", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				w := httptest.NewRecorder()
				engine.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
