package tests

import (
	"net/http"
	"net/url"
	"testing"
	"time"
)

// faultRun is the common shape of the fault tests: 1,000 events to two subscriptions (2,000
// deliveries) posted to both replicas; fault runs once 20 % of them have arrived.
func faultRun(t *testing.T, c *cluster, name string, fault func()) receiptStats {
	t.Helper()
	c.subscribe("all", []string{"*"}, true)
	c.subscribe("load", []string{"load.*"}, true)
	c.receiver.SetDelay(5 * time.Millisecond) // a little work per request keeps deliveries in flight
	start := time.Now()
	load := c.startLoad(name, "load.tick", 1000, []string{"all", "load"})
	load.waitProgress(0.2)
	fault()
	s := load.finish(0)
	t.Logf("%s: %d deliveries in %s, %d posts retried on another replica", name, s.Expected, time.Since(start).Round(time.Millisecond), load.retried.Load())
	return s
}

func TestSIGKILLOfAReplicaLosesNothing(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	victim := c.replicas[1]
	var killedAt time.Time
	var receivedAtKill int
	s := faultRun(t, c, "sigkill", func() {
		victim.Kill()
		killedAt = time.Now()
		receivedAtKill = c.receiver.Unique()
		time.Sleep(time.Second) // stays dead while the survivor carries on
		victim.Start()
		victim.WaitReady(time.Minute)
	})
	t.Logf("SIGKILL: lost = %d, duplicates = %d (of %d deliveries; %d had arrived at the kill)", s.Lost, s.Duplicates, s.Expected, receivedAtKill)
	// A duplicate is a request the killed process sent but could not record: its first receipt
	// precedes the kill, and it is sent again once, by the claim's redelivery or the sweep.
	for _, k := range s.DuplicatedKeys {
		n, first := c.receiver.Count(k)
		if n > 2 || first.After(killedAt) {
			t.Errorf("%v received %d times, first at %s (kill at %s): not explained by the kill", k, n, first.Format(time.StampMicro), killedAt.Format(time.StampMicro))
		}
	}
}

func TestSIGTERMDuringARunLosesNothingAndDuplicatesNothing(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	victim := c.replicas[1]
	var code int
	var took time.Duration
	s := faultRun(t, c, "sigterm", func() {
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
	s := faultRun(t, c, "pgterm", func() {
		for range 3 { // three rounds, a second apart, while the load goes on
			killed += c.db.terminateBackends(t)
			time.Sleep(time.Second)
		}
	})
	t.Logf("pg_terminate_backend: %d connections terminated; lost = %d, duplicates = %d (of %d deliveries)", killed, s.Lost, s.Duplicates, s.Expected)
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
	proxy := newTCPProxy(t, broker.Host)
	viaProxy := *broker
	viaProxy.Host = proxy.Addr()
	c := newCluster(t, clusterOptions{AMQPURL: viaProxy.String()})
	var openAtCut int
	var notReady []string
	s := faultRun(t, c, "brokercut", func() {
		openAtCut = proxy.Open()
		proxy.Cut()
		for i := range c.replicas { // the contract: /readyz is 503 while RabbitMQ does not answer
			if err := c.waitReadyz(i, http.StatusServiceUnavailable, 10*time.Second); err != nil {
				notReady = append(notReady, err.Error())
			}
		}
		time.Sleep(2 * time.Second)
		proxy.Restore()
		for i := range c.replicas {
			if err := c.waitReadyz(i, http.StatusOK, time.Minute); err != nil {
				t.Error(err)
			}
		}
	})
	t.Logf("broker cut: %d connections cut; lost = %d, duplicates = %d (of %d deliveries)", openAtCut/2, s.Lost, s.Duplicates, s.Expected)
	if openAtCut == 0 {
		t.Fatal("no broker connection went through the proxy: the fault did not happen")
	}
	for _, e := range notReady {
		t.Errorf("during the cut: %s", e)
	}
}
