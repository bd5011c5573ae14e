package jobs

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/tenancy"
)

// testLogger prints warnings and errors only: the lease-lost warnings are part of what tests provoke.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// startRunner runs r until the test ends (or stop is called) and fails the test if Run returns an error.
func startRunner(t *testing.T, r *Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("runner %s: %v", r.cfg.InstanceID, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("runner %s did not stop", r.cfg.InstanceID)
		}
	}
	t.Cleanup(stop)
	return stop
}

// newClient is a Client on db; NewClient fails only for a nil db.
func newClient(t *testing.T, db *database.DB) *Client {
	t.Helper()
	c, err := NewClient(db)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newTestRunner(t *testing.T, db *database.DB, cfg Config, kinds []Kind, schedules []Schedule) *Runner {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	r, err := NewRunner(db, cfg, kinds, schedules, testLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return r
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func queryInt(t *testing.T, db *database.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.SQL().QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func mustExec(t *testing.T, db *database.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.SQL().Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// counter reads a counter's current value.
func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatalf("read counter: %v", err)
	}
	return m.GetCounter().GetValue()
}

type jobState struct {
	Status    string
	Attempt   int
	ClaimedBy string
	LastError string
	UpdatedAt time.Time
}

func loadJob(t *testing.T, db *database.DB, id any) jobState {
	t.Helper()
	var s jobState
	err := db.SQL().QueryRow(`SELECT status, attempt, COALESCE(claimed_by, ''), COALESCE(last_error, ''), updated_at FROM jobs WHERE id = $1`, id).
		Scan(&s.Status, &s.Attempt, &s.ClaimedBy, &s.LastError, &s.UpdatedAt)
	if err != nil {
		t.Fatalf("load job %v: %v", id, err)
	}
	return s
}

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// gauge reads the depth gauge of one status.
func gauge(t *testing.T, r *Runner, status string) float64 {
	t.Helper()
	var m dto.Metric
	if err := r.metrics.depth.WithLabelValues(status).Write(&m); err != nil {
		t.Fatalf("read gauge: %v", err)
	}
	return m.GetGauge().GetValue()
}

// systemCtx is where tests enqueue jobs that belong to no tenant, as schedules and sweeps do.
func systemCtx() context.Context { return tenancy.System(context.Background(), "test") }

// receive waits for one value on ch, failing the test after within instead of hanging until the
// package's timeout.
func receive[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("%s: nothing within %s", what, within)
		panic("unreachable")
	}
}
