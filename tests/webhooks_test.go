package tests

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"
)

const succeededMetric = "keelson_webhooks_delivery_outcomes_total"

func TestEventsFanOutAcrossReplicasWithVerifiedSignatures(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	subs := map[string]subscription{
		"exact":    c.subscribe("exact", []string{"order.created"}, true),
		"prefix":   c.subscribe("prefix", []string{"order.*"}, true),
		"all":      c.subscribe("all", []string{"*"}, true),
		"disabled": c.subscribe("disabled", []string{"*"}, false),
	}
	matches := map[string][]string{ // event type → endpoints whose patterns match it
		"order.created":        {"exact", "prefix", "all"},
		"order.paid":           {"prefix", "all"},
		"order.refund.partial": {"prefix", "all"},
		"invoice.sent":         {"all"},
	}
	expected := map[receiptKey]bool{}
	wantTypes := map[string]map[string]int{"exact": {}, "prefix": {}, "all": {}}
	ctx := context.Background()
	n := 0
	for round := range 15 {
		for typ, endpoints := range matches {
			id := fmt.Sprintf("fanout-%s-%02d", strings.ReplaceAll(typ, ".", "_"), round)
			api := c.api(n % 2) // alternate replicas: both ingest
			n++
			got, err := api.postEvent(ctx, id, typ, map[string]any{"round": round})
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != id || got.Deliveries != len(endpoints) {
				t.Fatalf("POST /events %s %s = %+v, want %d deliveries", id, typ, got, len(endpoints))
			}
			for _, e := range endpoints {
				expected[receiptKey{Endpoint: e, WebhookID: id}] = true
				wantTypes[e][typ]++
			}
		}
	}
	// The same id again is the same event: nothing fans out twice.
	again, err := c.api(1).postEvent(ctx, "fanout-invoice_sent-00", "invoice.sent", map[string]any{"round": 0})
	if err != nil || again.ID != "fanout-invoice_sent-00" {
		t.Fatalf("repeated POST /events: %+v %v", again, err)
	}

	if !c.receiver.WaitUnique(len(expected), time.Minute) {
		t.Fatalf("received %d of %d deliveries", c.receiver.Unique(), len(expected))
	}
	s := c.receiver.Stats(expected)
	t.Logf("fan-out: expected=%d received=%d lost=%d duplicates=%d bad_signatures=%d", s.Expected, s.Unique, s.Lost, s.Duplicates, s.BadSignatures)
	if s.Lost != 0 || s.Unexpected != 0 || s.BadSignatures != 0 || s.Duplicates != 0 {
		t.Fatalf("lost=%d unexpected=%d bad_signatures=%d duplicates=%d", s.Lost, s.Unexpected, s.BadSignatures, s.Duplicates)
	}
	for endpoint, want := range wantTypes {
		if got := c.receiver.TypesAt(endpoint); !maps.Equal(got, want) {
			t.Errorf("%s received %v, want %v", endpoint, got, want)
		}
	}
	if got := c.receiver.TypesAt("disabled"); len(got) != 0 {
		t.Errorf("a disabled subscription received %v", got)
	}

	// Both replicas sent deliveries (the consumers compete for the queues), and together all of
	// them. A receipt precedes the recording of its attempt, so the counters are polled.
	sent := make([]float64, len(c.replicas))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var total float64
		for i := range c.replicas {
			n, err := c.api(i).metric(ctx, succeededMetric, `outcome="succeeded"`)
			if err != nil {
				t.Fatal(err)
			}
			sent[i], total = n, total+n
		}
		if int(total) == len(expected) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas report %v succeeded attempts, want %d in total", sent, len(expected))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, n := range sent {
		t.Logf("%s sent %.0f deliveries", c.replicas[i].name, n)
		if n == 0 {
			t.Errorf("%s sent no delivery: the work was not shared", c.replicas[i].name)
		}
	}
	list, err := c.api(1).deliveries(ctx, url.Values{"subscription_id": {subs["exact"].ID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != wantTypes["exact"]["order.created"] {
		t.Fatalf("GET /deliveries?subscription_id= listed %d, want %d", len(list), wantTypes["exact"]["order.created"])
	}
	for _, d := range list[:3] {
		for i := range c.replicas {
			got, err := c.api(i).delivery(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != "succeeded" || got.AttemptCount != 1 || len(got.Attempts) != 1 ||
				got.Attempts[0].Trigger != "scheduled" || got.Attempts[0].StatusCode == nil || *got.Attempts[0].StatusCode != 204 {
				t.Fatalf("%s GET /deliveries/%s = %+v", c.replicas[i].name, d.ID, got)
			}
		}
	}
}

// TestSteadyLoadDeliversEachOnce is the baseline of the fault tests: the same 2,000 deliveries over
// two replicas with no fault must arrive exactly once each.
func TestSteadyLoadDeliversEachOnce(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	c.subscribe("all", []string{"*"}, true)
	c.subscribe("load", []string{"load.*"}, true)
	c.receiver.SetDelay(receiverDelay)
	start := time.Now()
	load := c.startLoad("steady", "load.tick", 1000, 100, []string{"all", "load"})
	s := load.finish(0)
	causes := explainDuplicates(c, load, s, start.Add(-time.Hour)) // no fault: nothing is explained by one
	t.Logf("steady: lost = %d, duplicates = %d of %d deliveries in %s (%s)", s.Lost, s.Duplicates, s.Expected,
		time.Since(start).Round(time.Millisecond), causes)
	for _, u := range causes.Unexplained {
		t.Errorf("duplicate without a fault: %s", u)
	}
}
