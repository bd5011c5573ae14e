package messaging_test

import (
	"sync"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/messaging"
)

// Two replicas (two pools, two buses) forward one outbox and compete for one consumer queue:
// nothing is lost; duplicates are counted.
func TestTwoReplicasLoseNothing(t *testing.T) {
	database := dbtest.Create(t)
	dbA, dbB := database.Open(t), database.Open(t)
	relayA, pubA := newOutbox(t, dbA)
	relayB, pubB := newOutbox(t, dbB)
	cfg := testConfig(t, "shared")
	got := newCollector()
	sub := messaging.Subscription{Consumer: "shared", EventTypes: []string{"test.created"}, Handle: got.handle}
	busA := startBus(t, cfg, relayA, sub)
	busB := startBus(t, cfg, relayB, sub)

	const perPool, workers = 500, 4
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for w := range workers {
		db, pub := dbA, pubA
		if w%2 == 1 {
			db, pub = dbB, pubB
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perPool * 2 / workers {
				id := publishOne(t, db, pub, "test.created", map[string]int{"i": i}, true).ID
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	waitFor(t, 60*time.Second, "every event", func() bool { return got.has(ids) })
	waitFor(t, 30*time.Second, "an empty outbox", func() bool { return outboxRows(t, dbA) == 0 })
	seen, deliveries := got.snapshot()
	if len(seen) != len(ids) {
		t.Errorf("received %d distinct events, committed %d", len(seen), len(ids))
	}
	forwardedA := busA.counter(t, "keelson_outbox_forwarded_total", "")
	forwardedB := busB.counter(t, "keelson_outbox_forwarded_total", "")
	handledA := busA.counter(t, "keelson_messages_handled_total", "shared")
	handledB := busB.counter(t, "keelson_messages_handled_total", "shared")
	t.Logf("%d events: forwarded %v by A + %v by B (%v duplicate forwards); handled %v by A + %v by B; %d deliveries, %d duplicates",
		len(ids), forwardedA, forwardedB, forwardedA+forwardedB-float64(len(ids)), handledA, handledB, deliveries, deliveries-len(seen))
}
