package tests

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// receiverDelay is how long the receiver takes to answer: at 200 deliveries/s it keeps a few
// requests in flight in each replica when a fault hits.
const receiverDelay = 25 * time.Millisecond

// faultRun is the common shape of the fault tests: 1,000 events to two subscriptions (2,000
// deliveries) posted to both replicas at 100 events/s; fault runs once 20 % of them have arrived.
func faultRun(t *testing.T, c *cluster, name string, fault func()) (receiptStats, *loadRun) {
	t.Helper()
	c.subscribe("all", []string{"*"}, true)
	c.subscribe("load", []string{"load.*"}, true)
	c.receiver.SetDelay(receiverDelay)
	start := time.Now()
	load := c.startLoad(name, "load.tick", 1000, 100, []string{"all", "load"})
	load.waitProgress(0.2)
	fault()
	s := load.finish(0)
	t.Logf("%s: %d deliveries in %s, %d posts retried on another replica", name, s.Expected, time.Since(start).Round(time.Millisecond), load.retried.Load())
	return s, load
}

// duplicateCauses sorts duplicated deliveries by when their first copy arrived: before the fault
// ended (a request sent by a process that could not record it, sent again), after a wait in the
// queue longer than the claim lease (the sweep re-claimed it), or later: for a kill, no fault
// explains those; after a database fault they are its delayed effects (a forward or a handler
// retried after the connections came back).
type duplicateCauses struct {
	AtFault, OverLease int
	Unexplained        []string
	MaxCopies          int
}

func explainDuplicates(c *cluster, load *loadRun, s receiptStats, faultEnd time.Time) duplicateCauses {
	var d duplicateCauses
	for _, k := range s.DuplicatedKeys {
		n, first := c.receiver.Count(k)
		d.MaxCopies = max(d.MaxCopies, n)
		switch waited := first.Sub(load.AcceptedAt(k.WebhookID)); {
		case !first.After(faultEnd.Add(time.Second)): // a request already on the wire lands a little later
			d.AtFault++
		case waited >= testClaimLease-time.Second:
			d.OverLease++
		default:
			d.Unexplained = append(d.Unexplained, fmt.Sprintf("%s/%s ×%d first at %s, %s after ingestion",
				k.Endpoint, k.WebhookID, n, first.Format("15:04:05.000"), waited.Round(time.Millisecond)))
		}
	}
	return d
}

func (d duplicateCauses) String() string {
	return fmt.Sprintf("%d first sent before the fault ended, %d queued beyond the lease, %d later; at most %d copies of one delivery",
		d.AtFault, d.OverLease, len(d.Unexplained), max(d.MaxCopies, 1))
}

func TestSIGKILLOfAReplicaLosesNothing(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	victim := c.replicas[1]
	var killedAt time.Time
	var receivedAtKill int
	s, load := faultRun(t, c, "sigkill", func() {
		victim.Kill()
		killedAt = time.Now()
		receivedAtKill = c.receiver.Unique()
		time.Sleep(time.Second) // stays dead while the survivor carries on
		victim.Start()
		victim.WaitReady(time.Minute)
	})
	// A duplicate is a request the killed process sent but could not record: its first receipt
	// precedes the kill, and it is sent again when its message returns to the queue.
	causes := explainDuplicates(c, load, s, killedAt)
	t.Logf("SIGKILL: lost = %d, duplicates = %d of %d deliveries (%s); %d had arrived at the kill",
		s.Lost, s.Duplicates, s.Expected, causes, receivedAtKill)
	for _, u := range causes.Unexplained {
		t.Errorf("duplicate not explained by the kill: %s", u)
	}
	if causes.MaxCopies > 2 {
		t.Errorf("a delivery arrived %d times: the kill explains one extra copy at most", causes.MaxCopies)
	}
}

func TestSIGTERMDuringARunLosesNothingAndDuplicatesNothing(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	victim := c.replicas[1]
	var code int
	var took time.Duration
	s, _ := faultRun(t, c, "sigterm", func() {
		code, took = victim.Terminate(30 * time.Second)
	})
	t.Logf("SIGTERM: lost = %d, duplicates = %d (of %d deliveries); exit code %d after %s", s.Lost, s.Duplicates, s.Expected, code, took.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if s.Duplicates != 0 {
		t.Errorf("a graceful stop sent %d duplicates: %v", s.Duplicates, s.DuplicatedKeys)
	}
}

func TestTerminatedDatabaseConnectionsRecoverByThemselves(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	killed := 0
	var lastKill time.Time
	s, load := faultRun(t, c, "pgterm", func() {
		for range 3 { // three rounds, a second apart, while the load goes on
			killed += c.db.terminateBackends(t)
			lastKill = time.Now()
			time.Sleep(time.Second)
		}
	})
	// Every transaction in flight at a termination rolls back, a request sent but not recorded is
	// sent again: duplicates are expected, and reported.
	t.Logf("pg_terminate_backend: %d connections terminated in 3 rounds; lost = %d, duplicates = %d of %d deliveries (%s)",
		killed, s.Lost, s.Duplicates, s.Expected, explainDuplicates(c, load, s, lastKill))
	if killed == 0 {
		t.Fatal("no connection was terminated: the fault did not happen")
	}
	for i := range c.replicas {
		if err := c.waitReadyz(i, http.StatusOK, 30*time.Second); err != nil {
			t.Error(err)
		}
	}
}

func TestBrokerConnectionCutAndRestoredLosesNothing(t *testing.T) {
	broker, err := url.Parse(brokerURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := hosttest.NewProxy(t, broker.Host)
	viaProxy := *broker
	viaProxy.Host = proxy.Addr()
	c := newCluster(t, clusterOptions{AMQPURL: viaProxy.String()})
	var openAtCut int
	var notReady []string
	var restoredAt time.Time
	s, load := faultRun(t, c, "brokercut", func() {
		openAtCut = proxy.Open()
		proxy.Cut()
		for i := range c.replicas { // the contract: /readyz is 503 while RabbitMQ does not answer
			if err := c.waitReadyz(i, http.StatusServiceUnavailable, 30*time.Second); err != nil {
				notReady = append(notReady, err.Error())
			}
		}
		time.Sleep(2 * time.Second)
		proxy.Restore()
		restoredAt = time.Now()
		for i := range c.replicas {
			if err := c.waitReadyz(i, http.StatusOK, time.Minute); err != nil {
				t.Error(err)
			}
		}
	})
	t.Logf("broker cut: %d connections cut for 2 s; lost = %d, duplicates = %d of %d deliveries (%s)",
		openAtCut/2, s.Lost, s.Duplicates, s.Expected, explainDuplicates(c, load, s, restoredAt))
	if openAtCut == 0 {
		t.Fatal("no broker connection went through the proxy: the fault did not happen")
	}
	for _, e := range notReady {
		t.Errorf("during the cut: %s", e)
	}
}
