package tests

import (
	"testing"
	"time"
)

// TestFiftyIdleReplicasStoppedInARowEachExitZeroWithinFiveSeconds: SIGTERM as soon as a replica
// answers /readyz (its bus may still be starting) or later, fifty times. A stop that raced the
// start of watermill's routers once made an idle replica exit 1 after 25 s ("router close timeout").
func TestFiftyIdleReplicasStoppedInARowEachExitZeroWithinFiveSeconds(t *testing.T) {
	c := newCluster(t, clusterOptions{Replicas: 1})
	r := c.replicas[0]
	var slowest time.Duration
	for i := range 50 {
		if i > 0 {
			r.Start()
			r.WaitReady(60 * time.Second)
		}
		code, took := r.Terminate(30 * time.Second)
		if code != 0 || took > 5*time.Second {
			r.dumpLogs()
			t.Fatalf("stop %d: exit %d after %s, want exit 0 within 5s", i+1, code, took)
		}
		slowest = max(slowest, took)
	}
	t.Logf("50 stops, each exit 0; slowest %s", slowest)
}
