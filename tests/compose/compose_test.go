//go:build compose

package compose

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTheComposeFileRunsTheAppAndLosesNoEventUnderFaults brings docker-compose.yml up through the
// README's walkthrough, then injects one fault per phase while 1,000 events flow and counts what
// reached the receiver: nothing may be lost, duplicates are reported.
func TestTheComposeFileRunsTheAppAndLosesNoEventUnderFaults(t *testing.T) {
	s := newStack(t)

	// The images first, timed on their own; the walkthrough's `up --build` then finds them built.
	began := time.Now()
	s.must(30*time.Minute, s.cmd("build")...)
	t.Logf("images built (docker compose build) in %s", time.Since(began).Round(time.Second))
	began = time.Now()
	out := s.walkthrough()
	t.Logf("README walkthrough (up + first webhook + rename) in %s", time.Since(began).Round(time.Second))
	s.waitHealthy(3*time.Minute, "postgres", "rabbitmq", "receiver", "app1", "app2")

	migrate := s.containers("migrate")
	if len(migrate) != 1 {
		t.Fatalf("%d migrate containers, want 1", len(migrate))
	}
	if state := s.inspect(migrate[0], "{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}"); state != "exited 0 0" {
		t.Fatalf("migrate: %s, want exited 0 0", state)
	}
	s.awaitTypes(out, "order.created", "conversation.renamed")

	s.subscribeLoad()
	app2Started := s.inspect(s.container("app2"), "{{.State.StartedAt}}")
	var results []outcome

	// A replica dies mid-flow: the other one takes its unacknowledged messages at once and its
	// claimed deliveries once their lease expired.
	app1 := s.container("app1")
	phase := time.Now()
	ids := s.load("kill", 1000, []string{"app1", "app2"}, 300, func() { s.must(time.Minute, "docker", "kill", app1) })
	o := s.awaitDelivered("kill", ids, phase, 4*time.Minute)
	s.must(time.Minute, "docker", "start", app1) // an operator (or an orchestrator) brings it back
	o.replicasRestored = s.waitHealthy(3*time.Minute, "app1", "app2")
	results = append(results, o)

	// The broker leaves the network for 10 s: publishes wait in the outbox, consumers reconnect.
	network, rabbit := s.network(), s.container("rabbitmq")
	reconnected := make(chan time.Time, 1)
	phase = time.Now()
	ids = s.load("broker-cut", 1000, []string{"app1", "app2"}, 200, func() {
		s.must(time.Minute, "docker", "network", "disconnect", network, rabbit)
		time.AfterFunc(10*time.Second, func() {
			out, err := s.run(time.Minute, "docker", "network", "connect", "--alias", "rabbitmq", network, rabbit)
			if err != nil {
				t.Errorf("reconnect rabbitmq: %v %s", err, out)
			}
			reconnected <- time.Now()
		})
	})
	back := <-reconnected
	o = s.awaitDelivered("broker-cut", ids, phase, 4*time.Minute)
	s.waitHealthy(3*time.Minute, "rabbitmq", "app1", "app2")
	o.replicasRestored = time.Since(back)
	results = append(results, o)

	// PostgreSQL restarts: requests fail meanwhile and are sent again; pools reconnect.
	postgres := s.container("postgres")
	var restarted time.Time
	phase = time.Now()
	ids = s.load("db-restart", 1000, []string{"app1", "app2"}, 300, func() {
		s.must(2*time.Minute, "docker", "restart", postgres)
		restarted = time.Now()
	})
	o = s.awaitDelivered("db-restart", ids, phase, 4*time.Minute)
	s.waitHealthy(3*time.Minute, "postgres", "app1", "app2")
	o.replicasRestored = time.Since(restarted)
	results = append(results, o)

	// A third replica joins and shares the flow.
	s.must(5*time.Minute, s.cmd("--profile", "scale", "up", "-d", "--no-deps", "app3")...)
	app3Healthy := s.waitHealthy(3*time.Minute, "app3")
	phase = time.Now()
	ids = s.load("three-replicas", 1000, []string{"app1", "app2", "app3"}, 0, nil)
	o = s.awaitDelivered("three-replicas", ids, phase, 4*time.Minute)
	o.replicasRestored = app3Healthy
	results = append(results, o)

	// Nothing restarted a replica behind our back (the kill's restart was ours, by docker start).
	for _, svc := range []string{"app1", "app2", "app3"} {
		if n := s.inspect(s.container(svc), "{{.RestartCount}}"); n != "0" {
			t.Errorf("%s restarted %s times", svc, n)
		}
	}
	if got := s.inspect(s.container("app2"), "{{.State.StartedAt}}"); got != app2Started {
		t.Errorf("app2 was restarted (started %s, then %s)", app2Started, got)
	}

	t.Logf("%-15s %6s %5s %10s %16s %18s", "phase", "events", "lost", "duplicates", "all delivered in", "replicas healthy in")
	for _, r := range results {
		t.Logf("%-15s %6d %5d %10d %16s %18s", r.phase, r.events, r.lost, r.duplicates,
			r.allDeliveredIn.Round(100*time.Millisecond), r.replicasRestored.Round(100*time.Millisecond))
		if r.lost != 0 {
			t.Errorf("%s: %d of %d events never reached the receiver", r.phase, r.lost, r.events)
		}
	}

	s.must(5*time.Minute, s.cmd("--profile", "scale", "down", "-v", "--remove-orphans", "-t", "10")...)
	if left := s.leftovers(); len(left) > 0 {
		t.Fatalf("down -v left %v", left)
	}
}

// TestAStoppedBrokerNodeOfTheClusterLosesNoEvent runs the compose file's cluster profile as
// deploy/rabbitmq-cluster.env documents it — three RabbitMQ nodes, quorum queues, every replica
// knowing all three addresses — and stops the node the replicas dialled first while 1,000 events
// flow: the replicas fail over to the other nodes, the queues keep their majority, nothing is lost.
func TestAStoppedBrokerNodeOfTheClusterLosesNoEvent(t *testing.T) {
	s := newStack(t)
	// Three nodes on a busy machine: a health check's CLI boots an Erlang VM, which may take longer
	// than the compose file's 10 s there and loads two cores with three VMs every few seconds; the
	// nodes answer a probe of their AMQP port instead, and the test waits for the cluster itself below.
	s.appendOverride(clusterHealthOverride)
	cluster := func(args ...string) []string {
		return s.cmd(append([]string{"--env-file", "deploy/rabbitmq-cluster.env", "--profile", "cluster"}, args...)...)
	}

	// The brokers first, so the quorum queues the replicas declare get all three nodes as members.
	began := time.Now()
	s.must(20*time.Minute, cluster("up", "--build", "-d", "rabbitmq", "rabbitmq2", "rabbitmq3")...)
	// Three Erlang VMs booting side by side on a busy machine take minutes, and the health check's
	// own Erlang VM may then exceed its timeout: the cluster's view of its running nodes decides.
	s.waitHealthy(8*time.Minute, "rabbitmq")
	s.waitClusterOf(3, 8*time.Minute)
	t.Logf("three-node cluster formed in %s", time.Since(began).Round(time.Second))
	s.must(20*time.Minute, cluster("up", "--build", "-d")...)
	s.waitHealthy(3*time.Minute, "postgres", "receiver", "app1", "app2")

	s.subscribeLoad()
	s.waitQuorumQueues(3, 2*time.Minute)
	started := map[string]string{}
	for _, svc := range []string{"app1", "app2"} {
		started[svc] = s.inspect(s.container(svc), "{{.State.StartedAt}}")
	}

	first := s.container("rabbitmq")
	var stopped time.Time
	var ready *readiness
	phase := time.Now()
	// 25 events a second: the stop (up to 10 s) comes 12 s in and the last 200 wait for it to
	// return, so hundreds go out and are delivered with the node gone, on a fast machine too.
	ids := s.loadPaced("node-stop", 1000, []string{"app1", "app2"}, pace{perSecond: 25, holdFrom: 800}, 300, func() {
		ready = s.watchReady("app1", "app2") // from the moment the node goes
		began := time.Now()
		out, err := s.run(s.within(time.Minute), "docker", "stop", "-t", "10", first)
		if err != nil {
			t.Errorf("docker stop rabbitmq: %v %s", err, out)
		}
		stopped = time.Now()
		t.Logf("node rabbitmq stopped in %s", stopped.Sub(began).Round(100*time.Millisecond))
	})
	if ready == nil {
		t.Fatal("the node was never stopped")
	}
	o := s.awaitDelivered("node-stop", ids, phase, 6*time.Minute)
	s.waitHealthy(3*time.Minute, "app1", "app2")
	o.replicasRestored = time.Since(stopped)
	unready, stillDown := ready.outage()
	readyAgain := "never unready"
	if unready > 0 {
		readyAgain = unready.Round(100 * time.Millisecond).String()
	}
	t.Logf("%-15s %6s %5s %10s %16s %18s %22s", "phase", "events", "lost", "duplicates", "all delivered in",
		"replicas healthy in", "/readyz 200 again in")
	t.Logf("%-15s %6d %5d %10d %16s %18s %22s", o.phase, o.events, o.lost, o.duplicates,
		o.allDeliveredIn.Round(100*time.Millisecond), o.replicasRestored.Round(100*time.Millisecond), readyAgain)
	if o.lost != 0 {
		t.Errorf("%d of %d events never reached the receiver with one broker node stopped", o.lost, o.events)
	}
	if len(stillDown) > 0 {
		t.Errorf("%v not ready after every event arrived", stillDown)
	}
	for svc, at := range started {
		id := s.container(svc)
		if n, now := s.inspect(id, "{{.RestartCount}}"), s.inspect(id, "{{.State.StartedAt}}"); n != "0" || now != at {
			t.Errorf("%s was restarted (%s restarts, started %s, then %s)", svc, n, at, now)
		}
	}

	s.must(5*time.Minute, cluster("down", "-v", "--remove-orphans", "-t", "10")...)
	if left := s.leftovers(); len(left) > 0 {
		t.Fatalf("down -v left %v", left)
	}
}

// walkthrough runs the README's compose block as written; `docker compose` falls back to Compose v1.
func (s *stack) walkthrough() string {
	s.t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		s.t.Fatal(err)
	}
	_, after, found := strings.Cut(string(raw), "<!-- compose walkthrough")
	_, block, _ := strings.Cut(after, "```sh\n")
	block, _, closed := strings.Cut(block, "```")
	if !found || !closed || !strings.Contains(block, "docker compose up") {
		s.t.Fatal("README.md has no compose walkthrough block after <!-- compose walkthrough -->")
	}
	// The block speaks of app1's default port; the stack published app1 on a free one.
	script := "set -euo pipefail\n" +
		`if ! docker compose version >/dev/null 2>&1; then docker() { if [ "$1" = compose ]; then shift; command docker-compose "$@"; else command docker "$@"; fi; }; fi` +
		"\n" + `curl() { command curl "${@//127.0.0.1:8081/` + strings.TrimPrefix(s.urls["app1"], "http://") + `}"; }` +
		"\n" + block
	return s.must(20*time.Minute, "bash", "-c", script)
}

// awaitTypes waits until the receiver logged a verified delivery of each event type.
func (s *stack) awaitTypes(walkthroughOutput string, types ...string) {
	s.t.Helper()
	deadline := time.Now().Add(s.within(3 * time.Minute))
	for {
		logs := s.must(time.Minute, "docker", "logs", s.container("receiver"))
		missing := []string{}
		for _, typ := range types {
			found := false
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, `msg="webhook received"`) && strings.Contains(line, "type="+typ) && strings.Contains(line, "verified=true") {
					found = true
				}
			}
			if !found {
				missing = append(missing, typ)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the receiver logged no verified %v\nwalkthrough:\n%s\nreceiver:\n%s", missing, walkthroughOutput, logs)
		}
		time.Sleep(time.Second)
	}
}
