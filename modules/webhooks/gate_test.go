package webhooks

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/webhooks/internal/groupcommit"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// admit is await without the queue: the gate's decision at once.
func (g *sendGate) admit(sub uuid.UUID, vouched bool) (*gatePass, refusal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitNew(sub, vouched)
}

func TestTheSendGateKeepsAQuarterOfTheCapacityForFastEndpointsWhateverTheOthersDo(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	g := newSendGate(8, 3, func() time.Time { return now })
	fast := uuid.New()
	admit := func(sub uuid.UUID) bool { p, _ := g.admit(sub, false); return p != nil }
	send := func(p *gatePass, took time.Duration) {
		g.sending(p)
		now = now.Add(took)
		g.sent(p, took)
		g.release(p)
	}

	// Nothing known yet: one probe at a time; once it finished quickly the endpoint is fast.
	p, _ := g.admit(fast, false)
	require.NotNil(t, p)
	require.False(t, admit(fast), "one probe at a time")
	send(p, 10*time.Millisecond)
	var passes []*gatePass
	for range 3 {
		p, _ := g.admit(fast, false)
		require.NotNil(t, p, "a fast endpoint gets up to its cap")
		passes = append(passes, p)
	}
	_, refused := g.admit(fast, false)
	require.Equal(t, "endpoint_busy", refused.reason, "and no more")
	for _, p := range passes {
		send(p, time.Millisecond)
	}

	// Ten endpoints that never answer: probes within a quarter of the capacity (2), however long they hang.
	stalled := make([]uuid.UUID, 10)
	var probes []*gatePass
	for i := range stalled {
		stalled[i] = uuid.New()
		if p, _ := g.admit(stalled[i], false); p != nil {
			g.sending(p)
			probes = append(probes, p)
		}
	}
	require.Len(t, probes, 2)
	now = now.Add(20 * time.Second)
	for _, s := range stalled {
		_, refused := g.admit(s, false)
		require.Equal(t, "endpoint_probing", refused.reason, "still probing or waiting for a probe place")
	}
	// The probes time out: those endpoints are slow now, and slow ones share half the capacity (4).
	for _, p := range probes {
		g.sent(p, 20*time.Second)
		g.release(p)
	}
	slow := 0
	for range 3 {
		for _, s := range stalled[:2] {
			if p, _ := g.admit(s, false); p != nil {
				g.sending(p)
				slow++
			}
		}
	}
	require.Equal(t, 4, slow, "two per slow endpoint, four in all")
	_, refused = g.admit(stalled[0], false)
	require.Equal(t, "endpoint_slow", refused.reason)
	for _, s := range stalled[2:4] {
		require.True(t, admit(s), "probe places are free again")
	}
	require.Equal(t, 4, g.inFlightOf(classSlow, now))
	require.Equal(t, 2, g.probes())
	// An endpoint this replica never sent to, whose last attempt elsewhere succeeded, probes beyond the quarter.
	vouched := uuid.New()
	p, _ = g.admit(vouched, true)
	require.NotNil(t, p, "vouched: a probe though the probe places are full")
	p2, _ := g.admit(vouched, true)
	require.NotNil(t, p2, "vouched: more than one probe at a time...")
	_, refused = g.admit(vouched, true)
	require.False(t, refused.waitUntil.IsZero(), "...within a quarter of the capacity (2); the next waits for them")
	send(p2, 10*time.Millisecond)
	send(p, 10*time.Millisecond)
	require.Equal(t, classFast, g.class(g.endpoints[vouched], now))
	require.False(t, admit(uuid.New()), "an endpoint nobody vouched for waits for a probe place")

	// Six of eight handlers hang; the fast endpoint still gets its own cap.
	passes = passes[:0]
	for range 3 {
		p, _ := g.admit(fast, false)
		require.NotNil(t, p)
		passes = append(passes, p)
	}
	require.False(t, admit(fast))
	// A request of it that runs past slowSendAfter makes it slow, and the slow half is full.
	g.sending(passes[0])
	now = now.Add(slowSendAfter + time.Millisecond)
	require.False(t, admit(fast))
}

func TestTheSendGateTimesOnlyTheHTTPRequestAndASlowVerdictLapsesIntoAProbe(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	g := newSendGate(8, 3, func() time.Time { return now })
	admit := func(sub uuid.UUID) *gatePass { p, _ := g.admit(sub, false); return p }
	endpoint, hung := uuid.New(), []uuid.UUID{uuid.New(), uuid.New()}

	// A quick request, then a slow commit of its outcome before the place is given back.
	p := admit(endpoint)
	g.sending(p)
	now = now.Add(10 * time.Millisecond)
	g.sent(p, 10*time.Millisecond)
	now = now.Add(5 * time.Second)
	g.release(p)
	// Two takes that wait for the database longer than slowSendAfter.
	first, second := admit(endpoint), admit(endpoint)
	require.NotNil(t, first)
	require.NotNil(t, second)
	now = now.Add(5 * time.Second)
	third := admit(endpoint)
	require.NotNil(t, third, "our own waits leave the endpoint fast: its third place")
	for _, p := range []*gatePass{first, second, third} {
		g.release(p)
	}

	// Then one request of it takes 10 s: the average crosses slowSendAfter and the endpoint is slow.
	p = admit(endpoint)
	g.sending(p)
	now = now.Add(10 * time.Second)
	require.Equal(t, classSlow, g.class(g.endpoints[endpoint], now))
	g.sent(p, 10*time.Second)
	g.release(p)
	require.Equal(t, classSlow, g.class(g.endpoints[endpoint], now))
	// Two endpoints that hang fill the slow half (four places) and keep their own verdicts fresh.
	for _, h := range hung {
		p := admit(h)
		g.sending(p)
		now = now.Add(5 * time.Second)
		g.sent(p, 5*time.Second)
		g.release(p)
		for range 2 {
			p := admit(h)
			require.NotNil(t, p)
			g.sending(p)
		}
	}
	require.Nil(t, admit(endpoint), "slow, and the slow half is full")

	// Nothing refreshed its verdict for forgetAfter: it lapses, and a probe finds the endpoint quick again.
	now = now.Add(forgetAfter)
	require.Nil(t, admit(hung[0]), "hanging requests keep an endpoint slow whatever its verdict's age")
	p = admit(endpoint)
	require.NotNil(t, p, "a probe")
	require.True(t, p.probe)
	g.sending(p)
	now = now.Add(10 * time.Millisecond)
	g.sent(p, 10*time.Millisecond)
	g.release(p)
	require.Equal(t, classFast, g.class(g.endpoints[endpoint], now), "the probe's duration replaces the lapsed average")
}

func TestTheSendGateForgetsEndpointsItKnowsNothingUsefulOf(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	g := newSendGate(8, 3, func() time.Time { return now })
	lapsed, refusedOnly, sending, fresh := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	p, _ := g.admit(lapsed, false)
	g.sending(p)
	g.sent(p, 10*time.Millisecond)
	g.release(p)
	now = now.Add(forgetAfter + time.Second)
	g.probeCap = 0 // a new endpoint is refused: an entry with nothing learned
	_, refused := g.admit(refusedOnly, false)
	require.Equal(t, "endpoint_probing", refused.reason)
	g.probeCap = 2
	hanging, _ := g.admit(sending, false)
	g.sending(hanging)
	p, _ = g.admit(fresh, false)
	g.sending(p)
	g.sent(p, 10*time.Millisecond)
	g.release(p)

	g.forget(now)

	require.NotContains(t, g.endpoints, lapsed)
	require.NotContains(t, g.endpoints, refusedOnly)
	require.Contains(t, g.endpoints, sending, "a send in flight")
	require.Contains(t, g.endpoints, fresh, "a verdict that stands")
	for range forgetEvery {
		g.admit(uuid.New(), false)
	}
	require.Less(t, len(g.endpoints), forgetEvery, "admits forget on their own")
}

func TestASendGivesItsEndpointsPlaceBackBeforeItsOutcomeIsWritten(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	rc := newReceiver(t, nil)
	h.subscribe(rc.URL, "*")
	h.publish("gate.place", map[string]any{"n": 1})
	reqs := h.deliveryRequests()
	require.Len(t, reqs, 1)

	writing, proceed := make(chan struct{}), make(chan struct{})
	h.svc.outcomes = groupcommit.New(outcomeBatch, func(ctx context.Context, batch []outcome) ([]committed, error) {
		close(writing)
		<-proceed
		return h.svc.writeOutcomes(ctx, batch)
	})
	done := make(chan error, 1)
	go func() { done <- h.svc.attemptWithinLimits(tenantContext(), reqs[0]) }()
	select {
	case <-writing:
	case <-time.After(10 * time.Second):
		t.Fatal("the outcome was never written")
	}
	h.svc.gate.mu.Lock()
	busy := len(h.svc.gate.busy)
	h.svc.gate.mu.Unlock()
	require.Zero(t, busy, "the request is over: its endpoint's place is free while the outcome is written")
	require.Equal(t, 1, rc.count())
	close(proceed)
	require.NoError(t, <-done)
}

func TestRequestsRefusedByAFastEndpointAtItsCapWaitInItsQueueAndGetPlacesInTheirOrder(t *testing.T) {
	g := newSendGate(8, 1, time.Now)
	endpoint := uuid.New()
	p, _ := g.admit(endpoint, false)
	g.sending(p)
	g.sent(p, 200*time.Millisecond) // fast, with one place: it serves five requests within queueWait
	holder, _ := g.admit(endpoint, false)
	require.NotNil(t, holder)

	queued := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.endpoints[endpoint].queue)
	}
	type handed struct {
		waiter int
		pass   *gatePass
	}
	got := make(chan handed)
	for i := range 5 {
		go func() {
			p, _ := g.await(context.Background(), endpoint, false)
			got <- handed{i, p}
		}()
		require.Eventually(t, func() bool { return queued() == i+1 }, 5*time.Second, time.Millisecond)
	}
	_, refused := g.await(context.Background(), endpoint, false)
	require.Equal(t, "endpoint_busy", refused.reason, "the queue is full: put back at once")

	for i := range 5 {
		g.release(holder)
		h := <-got
		require.NotNil(t, h.pass, "a place given back goes to the queue's head")
		require.Equal(t, i, h.waiter, "in arrival order")
		holder = h.pass
		if i == 0 {
			_, refused = g.admit(endpoint, false)
			require.Equal(t, "endpoint_busy", refused.reason, "a newcomer goes behind the queue")
		}
	}
	require.Zero(t, queued())
}

func TestARequestWaitsForAFastEndpointsPlaceAtMostQueueWaitThenIsPutBack(t *testing.T) {
	g := newSendGate(8, 1, time.Now)
	endpoint := uuid.New()
	p, _ := g.admit(endpoint, false)
	g.sending(p)
	g.sent(p, time.Millisecond)
	holder, _ := g.admit(endpoint, false)
	require.NotNil(t, holder)

	start := time.Now()
	p, refused := g.await(context.Background(), endpoint, false)
	require.Nil(t, p)
	require.Equal(t, "endpoint_busy", refused.reason)
	require.GreaterOrEqual(t, time.Since(start), queueWait, "it waited its turn first")
	g.mu.Lock()
	require.Empty(t, g.endpoints[endpoint].queue, "and left the queue")
	g.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, _ = g.await(ctx, endpoint, false)
	require.Nil(t, p, "a cancelled handler leaves at once")
	g.release(holder)
	p, _ = g.admit(endpoint, false)
	require.NotNil(t, p, "the place given back with nobody waiting is free")
}

func TestARequestForAFastEndpointWhosePlacesAreTakenByASlowerSendWaitsForOneInsteadOfTheSweep(t *testing.T) {
	cfg := testConfig()
	cfg.EndpointConcurrency = 1
	cfg.SweepInterval = time.Hour // a put-back request would wait for it
	h := newHarness(t, cfg, harnessOptions{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 2 {
			time.Sleep(2 * briefWait) // a hiccup: the endpoint's average stays fast
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h.subscribe(rc.URL, "*")
	for i := range 3 {
		h.publish("gate.queue", map[string]any{"n": i})
	}
	reqs := h.deliveryRequests()
	require.Len(t, reqs, 3)

	require.NoError(t, h.svc.attemptWithinLimits(tenantContext(), reqs[0]), "the probe: the endpoint is fast")
	slow := make(chan error, 1)
	go func() { slow <- h.svc.attemptWithinLimits(tenantContext(), reqs[1]) }()
	require.Eventually(t, func() bool { return rc.count() == 2 }, 10*time.Second, time.Millisecond)
	require.NoError(t, h.svc.attemptWithinLimits(tenantContext(), reqs[2]), "waits for the place the slow send gives back")
	require.NoError(t, <-slow)

	require.Equal(t, 3, rc.count(), "sent, not put back")
	require.Zero(t, hosttest.Metric(t, h.registry, "keelson_webhooks_put_back_total", "reason", "endpoint_busy"))
}

func TestRequestsForANewEndpointWaitForItsProbeWhileTheProbesRequestIsYoungNotItsTake(t *testing.T) {
	g := newSendGate(8, 2, time.Now)
	endpoint := uuid.New()
	probe, _ := g.admit(endpoint, false)
	require.NotNil(t, probe)

	result := make(chan refusal, 1)
	go func() {
		if p, refused := g.await(context.Background(), endpoint, false); p == nil {
			result <- refused
		} else {
			result <- refusal{reason: "admitted"}
		}
	}()
	require.Never(t, func() bool { return len(result) > 0 }, 2*briefWait, 5*time.Millisecond,
		"the probe's take waits for our own database: that says nothing of the endpoint")
	g.sending(probe) // its request starts, and hangs
	select {
	case refused := <-result:
		require.Equal(t, "endpoint_probing", refused.reason, "briefWait of the probe's request, then put back")
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting for a probe that hangs")
	}
}
