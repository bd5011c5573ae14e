//go:build compose

package compose

import (
	"strings"
	"testing"
	"time"
)

// TestThePgBouncerProfileDeliversEveryEventOnce runs the compose file's pgbouncer profile as
// deploy/pgbouncer.env documents it: the migration and both replicas reach PostgreSQL only through
// PgBouncer in transaction mode. 100 events posted to the two replicas each reach the receiver
// once, and every connection PostgreSQL serves the keelson database comes from PgBouncer.
func TestThePgBouncerProfileDeliversEveryEventOnce(t *testing.T) {
	s := newStack(t)
	pooled := func(args ...string) []string {
		return s.cmd(append([]string{"--env-file", "deploy/pgbouncer.env", "--profile", "pgbouncer"}, args...)...)
	}
	began := time.Now()
	s.must(20*time.Minute, pooled("up", "--build", "-d")...)
	s.waitHealthy(5*time.Minute, "postgres", "rabbitmq", "receiver", "app1", "app2")
	t.Logf("stack up behind PgBouncer in %s", time.Since(began).Round(time.Second))
	if state := s.inspect(s.container("migrate"), "{{.State.Status}} {{.State.ExitCode}}"); state != "exited 0" {
		t.Fatalf("migrate through PgBouncer: %s, want exited 0", state)
	}

	// The image carries the build stamp compose passed as build arguments.
	if out := s.must(time.Minute, "docker", "run", "--rm", "keelson:"+imageTag, "version"); !strings.Contains(out, "keelson "+stampedVersion) ||
		!strings.Contains(out, stampedCommit) {
		t.Errorf("keelson version in the image:\n%s", out)
	}

	s.subscribeLoad()
	phase := time.Now()
	ids := s.load("pgbouncer", 100, []string{"app1", "app2"}, 0, nil)
	o := s.awaitDelivered("pgbouncer", ids, phase, 3*time.Minute)
	t.Logf("%d events through PgBouncer: %d lost, %d duplicates, all delivered in %s", o.events, o.lost, o.duplicates,
		o.allDeliveredIn.Round(100*time.Millisecond))
	if o.lost != 0 || o.duplicates != 0 {
		t.Errorf("%d lost and %d duplicated of %d events", o.lost, o.duplicates, o.events)
	}

	// PostgreSQL's view: the replicas' sessions are PgBouncer's, none came straight from a replica.
	bouncer := s.inspect(s.container("pgbouncer"), "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
	clients := strings.Fields(s.must(time.Minute, "docker", "exec", s.container("postgres"), "psql", "-U", "keelson", "-d", "keelson", "-Atc",
		"SELECT DISTINCT host(client_addr) FROM pg_stat_activity WHERE datname = 'keelson' AND client_addr IS NOT NULL"))
	if len(clients) == 0 || len(clients) > 1 || clients[0] != bouncer {
		t.Errorf("PostgreSQL serves keelson to %v, want only PgBouncer at %s", clients, bouncer)
	}

	s.must(5*time.Minute, pooled("down", "-v", "--remove-orphans", "-t", "10")...)
	if left := s.leftovers(); len(left) > 0 {
		t.Fatalf("down -v left %v", left)
	}
}
