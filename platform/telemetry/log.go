// Package telemetry makes a replica observable: its log handler (durations in milliseconds, the
// trace id of the span in the context), the OpenTelemetry tracer provider built from the standard
// OTEL_* variables, and the propagation of trace context through the outbox and RabbitMQ.
package telemetry

import (
	"context"
	"io"
	"log/slog"
)

// NewLogger returns the process logger writing format ("json" or "text") at level. Every duration
// attribute is written as milliseconds under its key with "_ms" appended, whatever the emitting
// package (a JSON duration would otherwise be nanoseconds and a text one "1.5s").
func NewLogger(w io.Writer, format string, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsInMilliseconds}
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(traceHandler{h})
}

func durationsInMilliseconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	return slog.Float64(a.Key+"_ms", float64(a.Value.Duration().Microseconds())/1000)
}

// traceHandler adds trace_id and span_id when the record's context carries a recorded span.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if traceID, spanID, ok := spanIDs(ctx); ok {
		r.AddAttrs(slog.String("trace_id", traceID), slog.String("span_id", spanID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
