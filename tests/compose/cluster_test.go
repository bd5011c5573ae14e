//go:build compose

package compose

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAStoppedBrokerNodeOfTheClusterLosesNoEvent runs the compose file's cluster profile as
// deploy/rabbitmq-cluster.env documents it — three RabbitMQ nodes, quorum queues, every replica
// knowing all three addresses — and stops the node the replicas dialled first while 1,000 events
// flow: the replicas fail over to the other nodes, the queues keep their majority, nothing is lost.
func TestAStoppedBrokerNodeOfTheClusterLosesNoEvent(t *testing.T) {
	s := newStack(t)
	cluster := func(args ...string) []string {
		return s.cmd(append([]string{"--env-file", "deploy/rabbitmq-cluster.env", "--profile", "cluster"}, args...)...)
	}

	// The brokers first, so the quorum queues the replicas declare get all three nodes as members.
	began := time.Now()
	s.must(20*time.Minute, cluster("up", "--build", "-d", "rabbitmq", "rabbitmq2", "rabbitmq3")...)
	s.waitHealthy(3*time.Minute, "rabbitmq", "rabbitmq2", "rabbitmq3")
	s.waitClusterOf(3, 3*time.Minute)
	t.Logf("three-node cluster formed in %s", time.Since(began).Round(time.Second))
	s.must(20*time.Minute, cluster("up", "--build", "-d")...)
	s.waitHealthy(3*time.Minute, "postgres", "receiver", "app1", "app2")

	if status, body, err := post(replicaURLs["app1"], "/webhooks/subscriptions", map[string]any{
		"url": "http://receiver:9000/hooks", "event_types": []string{"load.*"}, "secret": secret}); err != nil || status != http.StatusCreated {
		t.Fatalf("subscribe the load: %d %v %s", status, err, body)
	}
	queues := s.must(time.Minute, "docker", "exec", s.container("rabbitmq"), "rabbitmqctl", "-q", "list_queues", "name", "type")
	if !strings.Contains(queues, "webhooks.delivery") {
		t.Fatalf("no webhooks.delivery queue on the cluster:\n%s", queues)
	}
	for _, line := range strings.Split(strings.TrimSpace(queues), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[1] != "quorum" {
			t.Errorf("queue %s is %s, want quorum", f[0], f[1])
		}
	}
	started := map[string]string{}
	for _, svc := range []string{"app1", "app2"} {
		started[svc] = s.inspect(s.container(svc), "{{.State.StartedAt}}")
	}

	first := s.container("rabbitmq")
	var stopped time.Time
	phase := time.Now()
	ids := load(t, "node-stop", 1000, []string{"app1", "app2"}, 300, func() {
		s.must(time.Minute, "docker", "stop", "-t", "10", first)
		stopped = time.Now()
	})
	o := s.awaitDelivered("node-stop", ids, phase, 4*time.Minute)
	s.waitHealthy(3*time.Minute, "app1", "app2")
	o.replicasRestored = time.Since(stopped)
	t.Logf("%-15s %6s %5s %10s %16s %18s", "phase", "events", "lost", "duplicates", "all delivered in", "replicas healthy in")
	t.Logf("%-15s %6d %5d %10d %16s %18s", o.phase, o.events, o.lost, o.duplicates,
		o.allDeliveredIn.Round(100*time.Millisecond), o.replicasRestored.Round(100*time.Millisecond))
	if o.lost != 0 {
		t.Errorf("%d of %d events never reached the receiver with one broker node stopped", o.lost, o.events)
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

// waitClusterOf waits until the first broker node reports n running nodes.
func (s *stack) waitClusterOf(n int, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := s.run(time.Minute, "docker", "exec", s.container("rabbitmq"), "rabbitmqctl", "-q", "cluster_status", "--formatter", "json")
		var status struct {
			Running []string `json:"running_nodes"`
		}
		_, doc, found := strings.Cut(out, "{")
		if err == nil && found && json.Unmarshal([]byte("{"+doc), &status) == nil && len(status.Running) == n {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the cluster has not %d running nodes after %s: %v\n%s", n, timeout, err, out)
		}
		time.Sleep(2 * time.Second)
	}
}
