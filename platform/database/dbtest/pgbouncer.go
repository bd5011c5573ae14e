package dbtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelson/keelson/platform/database"
)

// PgBouncerEnv set to 1 makes every Create hand out a URL through a PgBouncer of the test's own in
// transaction mode (`make test-pgbouncer` runs the webhook and job tests so).
const PgBouncerEnv = "KEELSON_TEST_PGBOUNCER"

// PgBouncerPoolSize is the server connections the test's PgBouncer keeps per database: fewer than the
// pools' clients, so consecutive transactions of one client run on different server sessions.
const PgBouncerPoolSize = 6

// Pooled reports whether Create puts PgBouncer in front of the databases it makes (PgBouncerEnv).
func Pooled() bool { return os.Getenv(PgBouncerEnv) == "1" }

// CreateThroughPgBouncer is Create whose URL reaches the database through a PgBouncer in transaction
// mode, started for this test and stopped when it ends; migrations run directly.
func CreateThroughPgBouncer(t testing.TB, sets ...database.MigrationSet) *Database {
	t.Helper()
	d := createDirect(t, sets...)
	d.URL = StartPgBouncer(t, d.Name)
	d.TransactionPooling = true
	return d
}

// StartPgBouncer starts pgbouncer (pool_mode=transaction, PgBouncerPoolSize servers) on a free
// loopback port in front of database name of AdminURL's server, for as long as t, and returns its URL.
// It skips t when pgbouncer is not installed (scripts/services.sh installs it).
func StartPgBouncer(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			t.Skip("pgbouncer is not installed (make services installs it)")
		}
	}
	server, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("dbtest: parse admin url: %v", err)
	}
	dir := t.TempDir()
	// pgbouncer refuses to run as root: it switches to the PostgreSQL user, which must read its config.
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // a test's config, no secret in it
		t.Fatal(err)
	}
	runAs := ""
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("pgbouncer cannot run as root and there is no postgres user to run it as")
		}
		runAs = "user = " + u.Username + "\n"
	}
	for range 3 { // the free port may be taken between finding it and pgbouncer's bind
		port := freePort(t)
		ini := filepath.Join(dir, "pgbouncer.ini")
		conf := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s user=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = %d
max_client_conn = 1000
logfile =
pidfile =
%s`, name, server.Hostname(), portOf(server), name, server.User.Username(), port, PgBouncerPoolSize, runAs)
		if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil { //nolint:gosec // read by the postgres user
			t.Fatal(err)
		}
		var logs syncBuffer
		cmd := exec.CommandContext(context.Background(), bin, ini) //nolint:gosec // the installed pgbouncer with the test's config
		cmd.Stdout, cmd.Stderr = &logs, &logs
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("dbtest: start pgbouncer: %v", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		u := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", server.User.Username(), port, name)
		if waitForPgBouncer(u, done) {
			t.Cleanup(func() {
				_ = cmd.Process.Signal(syscall.SIGTERM) // immediate shutdown: the pools are closed by now
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
				}
			})
			return u
		}
		_ = cmd.Process.Kill()
		<-done
		t.Logf("dbtest: pgbouncer on port %d did not answer:\n%s", port, logs.String())
	}
	t.Fatal("dbtest: pgbouncer did not start")
	return ""
}

// waitForPgBouncer answers whether a query through u succeeds within 10 s while the process runs.
func waitForPgBouncer(u string, exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, u)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return strconv.Itoa(5432)
}

// syncBuffer is the process's output, written by exec's copying goroutine and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
