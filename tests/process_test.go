package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// replica is one `keelson serve` process; Restart starts a new process with the same environment and port.
type replica struct {
	t    *testing.T
	name string
	bin  string
	env  map[string]string
	port int
	logs string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error
	starts  int
}

// freePort asks the kernel for an unused loopback port.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runMigrate runs `keelson migrate` to completion.
func runMigrate(t *testing.T, env map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, keelson(t), "migrate")
	cmd.Env = environ(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("keelson migrate: %v\n%s", err, out)
	}
}

// startReplica starts `keelson serve` on a free port and waits until /readyz answers 200.
func startReplica(t *testing.T, name string, env map[string]string) *replica {
	t.Helper()
	logs := t.TempDir()
	if dir := os.Getenv("TEST_LOG_DIR"); dir != "" { // keep the replicas' logs for a post-mortem
		logs = filepath.Join(dir, t.Name())
		if err := os.MkdirAll(logs, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := &replica{t: t, name: name, bin: keelson(t), env: map[string]string{}, port: freePort(t), logs: logs}
	for k, v := range env {
		r.env[k] = v
	}
	r.env["HTTP_ADDR"] = fmt.Sprintf("127.0.0.1:%d", r.port)
	r.env["INSTANCE_ID"] = name
	t.Cleanup(func() {
		r.Kill()
		if t.Failed() {
			r.dumpLogs()
		}
	})
	r.Start()
	r.WaitReady(60 * time.Second)
	return r
}

func environ(env map[string]string) []string {
	out := os.Environ()
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// URL is the replica's base URL.
func (r *replica) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", r.port) }

// Start launches a new process; the previous one must have exited.
func (r *replica) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	logPath := filepath.Join(r.logs, fmt.Sprintf("%s-%d.log", r.name, r.starts))
	f, err := os.Create(logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(r.bin, "serve")
	cmd.Env = environ(r.env)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		r.t.Fatalf("start %s: %v", r.name, err)
	}
	done := make(chan struct{})
	r.cmd, r.done, r.exitErr = cmd, done, nil
	go func() {
		err := cmd.Wait()
		_ = f.Close()
		r.mu.Lock()
		r.exitErr = err
		r.mu.Unlock()
		close(done)
	}()
}

// WaitReady waits for /readyz to answer 200.
func (r *replica) WaitReady(timeout time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if code, _ := r.readyz(); code == http.StatusOK {
			return
		}
		select {
		case <-r.doneChan():
			r.dumpLogs()
			r.t.Fatalf("%s exited before it was ready: %v", r.name, r.exitError())
		default:
		}
		if time.Now().After(deadline) {
			r.dumpLogs()
			r.t.Fatalf("%s not ready after %s", r.name, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *replica) readyz() (int, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(r.URL() + "/readyz")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (r *replica) doneChan() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

func (r *replica) exitError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exitErr
}

// Kill sends SIGKILL and waits for the process to disappear.
func (r *replica) Kill() {
	r.signal(syscall.SIGKILL)
	if done := r.doneChan(); done != nil {
		<-done
	}
}

// Terminate sends SIGTERM and returns the exit code and how long the process took to exit,
// or fails the test when it is still running after timeout.
func (r *replica) Terminate(timeout time.Duration) (int, time.Duration) {
	r.t.Helper()
	start := time.Now()
	r.signal(syscall.SIGTERM)
	select {
	case <-r.doneChan():
	case <-time.After(timeout):
		r.Kill()
		r.t.Fatalf("%s still running %s after SIGTERM", r.name, timeout)
	}
	took := time.Since(start)
	var exit *exec.ExitError
	if err := r.exitError(); errors.As(err, &exit) {
		return exit.ExitCode(), took
	} else if err != nil {
		r.t.Fatalf("%s: %v", r.name, err)
	}
	return 0, took
}

func (r *replica) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(sig)
}

// dumpLogs prints the tail of every log of this replica, to explain a failure.
func (r *replica) dumpLogs() {
	paths, _ := filepath.Glob(filepath.Join(r.logs, r.name+"-*.log"))
	for _, p := range paths {
		lines := tail(p, 40)
		r.t.Logf("--- %s (last %d lines)\n%s", filepath.Base(p), len(lines), strings.Join(lines, "\n"))
	}
}

func tail(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines
}
