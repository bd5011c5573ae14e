package telemetry

import (
	"bytes"
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
