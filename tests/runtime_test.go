package tests

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMigrateIsIdempotentAndSafeFromTwoProcessesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	db := newEmptyDatabase(t)
	env := map[string]string{"DATABASE_URL": db.URL, "LOG_LEVEL": "warn"}
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(keelson(t), "migrate")
			cmd.Env = environ(env)
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		}()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("concurrent migrate %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	runMigrate(t, env) // nothing left to do: still exit 0

	owners := versionTables(t, db)
	for _, want := range []string{"schema_migrations_platform", "schema_migrations_webhooks", "schema_migrations_conversations", "schema_migrations_proposals"} {
		if !owners[want] {
			t.Errorf("no %s after migrate: %v", want, owners)
		}
	}
}

// versionTables lists the goose version tables in the database (one per module).
func versionTables(t *testing.T, db *emptyDatabase) map[string]bool {
	t.Helper()
	conn, err := sql.Open("pgx", db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT tablename FROM pg_tables WHERE tablename LIKE 'schema_migrations_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	found := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		found[name] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return found
}

func TestInvalidConfigurationExitsWithOneClearLine(t *testing.T) {
	cases := map[string]string{
		"WEBHOOKS_CLAIM_LEASE":           "abc",
		"WEBHOOKS_SEND_TIMEOUT":          "soon",
		"WEBHOOKS_ALLOW_PRIVATE_TARGETS": "maybe",
		"DATABASE_URL":                   "mysql://db/keelson",
		"LOG_FORMAT":                     "xml",
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			for _, sub := range []string{"serve", "migrate"} {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				cmd := exec.CommandContext(ctx, keelson(t), sub)
				cmd.Env = environ(map[string]string{name: value})
				out, err := cmd.CombinedOutput()
				cancel()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 {
					t.Fatalf("keelson %s with %s=%q: %v, want exit status 1\n%s", sub, name, value, err, out)
				}
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				if len(lines) != 1 || !strings.Contains(lines[0], name) {
					t.Fatalf("keelson %s with %s=%q printed %q, want one line naming the variable", sub, name, value, out)
				}
			}
		})
	}
}

// TestTheComposeDemoReceiverShowsSignedDeliveries runs what `docker compose up` runs, without
// Docker: the demo receiver with the secret of docker-compose.yml, subscribed with that secret as
// the README's curl session does, logs a verified delivery.
func TestTheComposeDemoReceiverShowsSignedDeliveries(t *testing.T) {
	c := newCluster(t, clusterOptions{Replicas: 1})
	compose := loadCompose(t)
	secret := compose.Services["receiver"].Environment["RECEIVER_SECRETS"]

	port := freePort(t)
	logPath := filepath.Join(t.TempDir(), "receiver.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	receiver := exec.Command(binary(t, "./examples/receiver"))
	receiver.Env = environ(map[string]string{"RECEIVER_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "RECEIVER_SECRETS": secret})
	receiver.Stdout, receiver.Stderr = logFile, logFile
	if err := receiver.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = receiver.Process.Kill()
		_ = receiver.Wait()
		_ = logFile.Close()
	})

	ctx := context.Background()
	var sub subscription
	in := map[string]any{"url": fmt.Sprintf("http://127.0.0.1:%d/hooks", port), "event_types": []string{"*"}, "secret": secret}
	if _, err := c.api(0).do(ctx, "POST", "/webhooks/subscriptions", in, &sub); err != nil {
		t.Fatalf("subscribe with the compose secret: %v", err)
	}
	if _, err := c.api(0).postEvent(ctx, "demo-1", "demo.hello", map[string]any{"hello": "world"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if line := findLine(logPath, "demo-1"); line != "" {
			if !strings.Contains(line, "webhook received") || !strings.Contains(line, "verified=true") {
				t.Fatalf("the receiver logged %q, want a verified delivery", line)
			}
			t.Logf("receiver: %s", line)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver logged no delivery of demo-1:\n%s", strings.Join(tail(logPath, 20), "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func findLine(path, s string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return sc.Text()
		}
	}
	return ""
}
