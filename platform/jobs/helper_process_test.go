package jobs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

// Environment of a helper process: the test binary re-executed as a worker replica that a test can SIGKILL.
const (
	helperModeEnv     = "KEELSON_JOBS_HELPER"
	helperDBEnv       = "KEELSON_JOBS_HELPER_DB"
	helperInstanceEnv = "KEELSON_JOBS_HELPER_INSTANCE"
)

// TestHelperProcess is not a test: it is the worker process other tests start and kill.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperModeEnv)
	if mode == "" {
		return
	}
	ctx := context.Background()
	db, err := database.Open(ctx, database.Config{URL: os.Getenv(helperDBEnv), TransactionPooling: dbtest.Pooled()})
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	instance := os.Getenv(helperInstanceEnv)
	var kinds []Kind
	var schedules []Schedule
	cfg := Config{InstanceID: instance, PollInterval: 50 * time.Millisecond}
	switch mode {
	case "jobs":
		cfg.Workers, cfg.Lease = 10, 2*time.Second
		kinds = []Kind{{Name: "block", Handle: func(ctx context.Context, job Job) error {
			if err := db.Conn(ctx).Exec(`INSERT INTO started (job_id, instance) VALUES (?, ?)`, job.ID, instance).Error; err != nil {
				return err
			}
			select {} // holds the claim until the process is killed
		}}}
	case "schedule":
		// Runs of a second: the test's kill, decided when a run has just started, lands inside it however
		// late a loaded machine delivers it.
		cfg.Lease = 3 * time.Second
		schedules = []Schedule{tickSchedule(db, instance, time.Second)}
	default:
		t.Fatalf("helper: unknown mode %q", mode)
	}
	r, err := NewRunner(db, cfg, kinds, schedules, testLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	_ = r.Run(ctx) // never returns: the test kills this process
}

// helperProcess is a running worker replica in another process.
type helperProcess struct {
	cmd    *exec.Cmd
	output bytes.Buffer
	exited bool
}

func startHelper(t *testing.T, mode, dbURL, instance string) *helperProcess {
	t.Helper()
	h := &helperProcess{cmd: exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")}
	h.cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, helperDBEnv+"="+dbURL, helperInstanceEnv+"="+instance)
	h.cmd.Stdout, h.cmd.Stderr = &h.output, &h.output
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	t.Cleanup(func() {
		if !h.exited {
			h.kill(t)
		}
		if t.Failed() {
			t.Logf("helper %s output:\n%s", instance, h.output.String())
		}
	})
	return h
}

// kill sends SIGKILL: no deferred code, no release, no goodbye to the database.
func (h *helperProcess) kill(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill helper: %v", err)
	}
	_ = h.cmd.Wait()
	h.exited = true
	if ws, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want killed by SIGKILL (output: %s)", h.cmd.ProcessState, h.output.String())
	}
}

// tickSchedule records each run's start and end (database clock) so overlaps can be checked afterwards.
func tickSchedule(db *database.DB, instance string, lasts time.Duration) Schedule {
	return Schedule{Name: "tick", Interval: 50 * time.Millisecond, Run: func(ctx context.Context) error {
		var id int64
		if err := db.SQL().QueryRowContext(ctx,
			`INSERT INTO schedule_runs (instance, started_at) VALUES ($1, clock_timestamp()) RETURNING id`, instance).Scan(&id); err != nil {
			return err
		}
		select {
		case <-time.After(lasts):
		case <-ctx.Done():
		}
		_, err := db.SQL().ExecContext(context.WithoutCancel(ctx),
			`UPDATE schedule_runs SET finished_at = clock_timestamp() WHERE id = $1`, id)
		return err
	}}
}
