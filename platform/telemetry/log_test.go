package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDurationsAreLoggedInMilliseconds(t *testing.T) {
	var buf bytes.Buffer
	logger := NewLogger(&buf, "json", slog.LevelInfo)
	logger.Info("done", "duration", 1500*time.Microsecond, slog.Group("config", slog.Duration("shutdown_timeout", 25*time.Second)))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["duration_ms"] != 1.5 {
		t.Fatalf("duration_ms = %v, want 1.5: %s", rec["duration_ms"], buf.String())
	}
	if group, _ := rec["config"].(map[string]any); group["shutdown_timeout_ms"] != 25000.0 {
		t.Fatalf("a duration inside a group is not in milliseconds: %s", buf.String())
	}

	buf.Reset()
	NewLogger(&buf, "text", slog.LevelInfo).Info("done", "wait", 2*time.Second)
	if !strings.Contains(buf.String(), "wait_ms=2000") {
		t.Fatalf("text log: %s", buf.String())
	}
}

func TestLogLinesCarryTheTraceIDOfTheirContext(t *testing.T) {
	var buf bytes.Buffer
	logger := NewLogger(&buf, "json", slog.LevelInfo)
	ctx := Extract(context.Background(), map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	logger.InfoContext(ctx, "handled")
	logger.Info("no context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if !strings.Contains(lines[0], `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
		t.Fatalf("line logged with a traced context: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Fatalf("line logged without a trace: %s", lines[1])
	}
}
