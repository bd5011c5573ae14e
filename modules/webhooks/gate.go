package webhooks

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// sendGate shares one replica's sending capacity (its delivery handlers) among endpoints, so slow or
// dead endpoints cannot take it all. Each endpoint is, on this replica:
//   - fast: its recent requests took less than slowAfter and none in flight has run longer — up to
//     perEndpoint sends in flight;
//   - unknown: no request finished yet, or none for forgetAfter — one probe at a time; probes of all
//     endpoints within a quarter of the capacity, each counted as a probe until it ends, however long
//     it runs; except that an endpoint whose last attempt on any replica succeeded (vouched) probes
//     outside that quarter, up to perEndpoint sends at once, all vouched probes within another
//     quarter, so endpoints new and hanging cannot keep a healthy one waiting on a replica that has
//     not sent to it yet (after a restart, a scale-up, or when the other replica took its traffic);
//   - slow: otherwise — up to slowPerEndpoint sends, slow sends of all endpoints within half the
//     capacity.
//
// So at least a quarter of the handlers stays for endpoints known to be fast whatever the others do;
// a new endpoint waits for a probe place while many new ones hang. A request refused while a place of
// its endpoint is likely to free soon waits in the endpoint's queue (await), first come first served,
// and a place given back goes to the queue's head; any other refused request is put back to wait,
// without spending an attempt, for the sweep.
//
// Only the HTTP request is timed (sending, sent): a take or an outcome that waits for our own
// database says nothing of the endpoint. A place is held from admission, before the take, until the
// request is over (sent); the outcome's write that follows does not hold it. And a slow verdict that
// nothing refreshed for forgetAfter lapses into a probe, so an endpoint judged slow once cannot be
// held there by slow neighbours that keep the slow half full.
type sendGate struct {
	mu              sync.Mutex
	endpoints       map[uuid.UUID]*endpointLoad
	busy            map[uuid.UUID]*endpointLoad // those with sends in flight
	probeCap        int
	slowCap         int
	perEndpoint     int
	slowPerEndpoint int
	slowAfter       time.Duration
	now             func() time.Time
	admits          int // since the last forget
}

// forgetEvery is how many admits pass between two forgets of the endpoints the gate knows nothing
// useful of: the map stays as large as the endpoints sent to within forgetAfter, not all ever seen.
const forgetEvery = 1024

// endpointLoad is what the gate knows of one subscription's endpoint on this replica.
type endpointLoad struct {
	inFlight map[*gatePass]struct{}
	queue    []*gateWaiter // requests waiting for a place, in arrival order
	ewma     time.Duration // smoothed duration of its requests; 0 until one finished
	learned  time.Time     // when a request last finished
}

// gateWaiter is a request in an endpoint's queue; pass receives the place handed to it.
type gateWaiter struct {
	vouched bool
	pass    chan *gatePass // buffered: the hand-over never blocks
}

// gatePass is one admitted send; release it when the handler is done with it.
type gatePass struct {
	sub      uuid.UUID
	admitted time.Time
	sending  time.Time // when its HTTP request started; zero before and after
	probe    bool      // the first send to an unknown endpoint: counts against probeCap until it ends
	vouched  bool      // ...of a vouched endpoint: such probes have a quarter of their own, up to perEndpoint each
}

type endpointClass int

const (
	classFast endpointClass = iota
	classUnknown
	classSlow
)

const (
	slowSendAfter   = 2 * time.Second
	slowPerEndpoint = 2
	ewmaWeight      = 0.3
	// forgetAfter is how long a verdict stands without a finished request. An endpoint that keeps
	// hanging refreshes it with every timed-out request, so only one that stopped being sent to lapses.
	forgetAfter = 30 * time.Second
)

func newSendGate(capacity, perEndpoint int, now func() time.Time) *sendGate {
	return &sendGate{
		endpoints: map[uuid.UUID]*endpointLoad{}, busy: map[uuid.UUID]*endpointLoad{},
		probeCap: max(1, capacity/4), slowCap: max(1, capacity/2), perEndpoint: max(1, perEndpoint),
		slowPerEndpoint: min(slowPerEndpoint, max(1, perEndpoint)), slowAfter: slowSendAfter, now: now,
	}
}

// class judges an endpoint at now.
func (g *sendGate) class(e *endpointLoad, now time.Time) endpointClass {
	if e.ewma == 0 {
		return classUnknown
	}
	for p := range e.inFlight {
		if !p.sending.IsZero() && now.Sub(p.sending) > g.slowAfter {
			return classSlow
		}
	}
	if now.Sub(e.learned) > forgetAfter {
		return classUnknown
	}
	switch {
	case e.ewma < g.slowAfter:
		return classFast
	default:
		return classSlow
	}
}

// briefWait is how young an endpoint's probe may be, or how fast its average, for a refused request
// to wait in the endpoint's queue instead of being put back: a burst to an endpoint that answers
// quickly then goes through, while requests for hanging endpoints leave their handlers at once.
const briefWait = 250 * time.Millisecond

// queueWait is how long a request for a fast endpoint at its cap waits for its turn before it is put
// back: such an endpoint frees a place every few milliseconds, while a put-back request waits for
// the next sweep (SweepInterval, 5 s by default).
const queueWait = time.Second

// refusal says why the gate let no send start, how long to put the request back for, until when a place
// is likely to free (zero: not worth waiting for), and how many requests may wait for one meanwhile.
type refusal struct {
	reason    string // the put-back metric's: endpoint_busy (fast, at its cap), endpoint_probing, endpoint_slow
	retryIn   time.Duration
	waitUntil time.Time
	queueRoom int
	// hanging: a send to the endpoint has had no answer for slowAfter; the request is left under its
	// claim's lease rather than put back (a write per request while the endpoint is being held).
	hanging bool
}

// await lets a send to sub start, or says why not; vouched says the endpoint's last attempt, on any
// replica, succeeded. A request refused while a place is likely to free soon joins the endpoint's
// queue, if not full, and waits there for a place: while the refusal, judged afresh when its waitUntil
// comes, still says a place is likely to free, for queueWait at most, or until ctx ends.
func (g *sendGate) await(ctx context.Context, sub uuid.UUID, vouched bool) (*gatePass, refusal) {
	g.mu.Lock()
	p, refused := g.admitNew(sub, vouched)
	e, now := g.endpoints[sub], g.now()
	if p != nil || !refused.waitUntil.After(now) || len(e.queue) >= refused.queueRoom {
		g.mu.Unlock()
		return p, refused
	}
	w := &gateWaiter{vouched: vouched, pass: make(chan *gatePass, 1)}
	e.queue = append(e.queue, w)
	g.mu.Unlock()

	deadline := now.Add(queueWait)
	for until := earlier(refused.waitUntil, deadline); ; {
		timer := time.NewTimer(until.Sub(now))
		select {
		case p := <-w.pass:
			timer.Stop()
			return p, refusal{}
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
		g.mu.Lock()
		i := slices.Index(e.queue, w)
		if i < 0 {
			g.mu.Unlock()
			return <-w.pass, refusal{} // a place was handed over as the wait ended
		}
		now = g.now()
		refused = g.refuse(e, g.class(e, now), now, vouched)
		if until = earlier(refused.waitUntil, deadline); until.After(now) && ctx.Err() == nil {
			g.mu.Unlock()
			continue
		}
		e.queue = slices.Delete(e.queue, i, i+1)
		g.mu.Unlock()
		return nil, refused
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// admitNew admits a request that is not in the endpoint's queue: it goes behind those that are.
func (g *sendGate) admitNew(sub uuid.UUID, vouched bool) (*gatePass, refusal) {
	now := g.now()
	if g.admits++; g.admits >= forgetEvery {
		g.forget(now)
	}
	e := g.endpoints[sub]
	if e == nil {
		e = &endpointLoad{inFlight: map[*gatePass]struct{}{}}
		g.endpoints[sub] = e
	}
	if len(e.queue) > 0 {
		return nil, g.refuse(e, g.class(e, now), now, vouched)
	}
	return g.place(sub, e, vouched, now)
}

// place gives a send to sub a place if its class has one free.
func (g *sendGate) place(sub uuid.UUID, e *endpointLoad, vouched bool, now time.Time) (*gatePass, refusal) {
	n := len(e.inFlight)
	class := g.class(e, now)
	full := false
	switch class {
	case classFast:
		full = n >= g.perEndpoint
	case classUnknown:
		if vouched {
			full = n >= g.perEndpoint || g.vouchedProbes() >= g.probeCap
		} else {
			full = n >= 1 || g.probes() >= g.probeCap
		}
	case classSlow:
		full = n >= g.slowPerEndpoint || g.inFlightOf(classSlow, now) >= g.slowCap
	}
	if full {
		return nil, g.refuse(e, class, now, vouched)
	}
	p := &gatePass{sub: sub, admitted: now, probe: class == classUnknown, vouched: vouched}
	e.inFlight[p] = struct{}{}
	g.busy[sub] = e
	return p, refusal{}
}

// refuse says why an endpoint of class has no place for one more send, and until when one is likely
// to free: soon for a fast endpoint, or while its probe is young. A vouched endpoint's requests wait
// for its probe up to queueWait, as many as its places would serve meanwhile: it answered last time,
// and one that hangs now is held (breaker.go) and refused at once after that.
func (g *sendGate) refuse(e *endpointLoad, class endpointClass, now time.Time, vouched bool) refusal {
	switch class {
	case classFast:
		r := refusal{reason: "endpoint_busy", retryIn: max(e.ewma, 50*time.Millisecond)}
		if e.ewma < briefWait {
			// As many as its places serve within queueWait at its average pace.
			r.waitUntil, r.queueRoom = now.Add(queueWait), g.perEndpoint*int(queueWait/max(e.ewma, time.Millisecond))
		}
		return r
	case classUnknown:
		// While its probe's request is young, or before it started (the probe's take waits for our own
		// database): a new endpoint that hangs holds its waiters for briefWait of its request at most.
		r := refusal{reason: "endpoint_probing", retryIn: g.slowAfter, queueRoom: g.slowCap}
		wait := briefWait
		if vouched {
			wait, r.queueRoom = queueWait, g.perEndpoint*int(queueWait/briefWait)
		}
		for p := range e.inFlight {
			switch {
			case !p.probe:
			case p.sending.IsZero():
				r.waitUntil = now.Add(wait) // judged afresh then
			default:
				r.waitUntil = p.sending.Add(wait)
			}
		}
		r.hanging = g.hanging(e, now)
		return r
	default:
		return refusal{reason: "endpoint_slow", retryIn: max(e.ewma, g.slowAfter), hanging: g.hanging(e, now)}
	}
}

// hanging says whether a send to the endpoint has run for slowAfter without an answer.
func (g *sendGate) hanging(e *endpointLoad, now time.Time) bool {
	for p := range e.inFlight {
		if !p.sending.IsZero() && now.Sub(p.sending) > g.slowAfter {
			return true
		}
	}
	return false
}

// forget drops the endpoints with nothing in flight whose verdict is none or lapsed: an endpoint
// absent from the map is judged the same way (unknown), so this changes no decision.
func (g *sendGate) forget(now time.Time) {
	g.admits = 0
	for sub, e := range g.endpoints {
		if len(e.inFlight) == 0 && len(e.queue) == 0 && (e.ewma == 0 || now.Sub(e.learned) > forgetAfter) {
			delete(g.endpoints, sub)
		}
	}
}

// inFlightOf counts the sends in flight to endpoints of one class, probes apart.
func (g *sendGate) inFlightOf(c endpointClass, now time.Time) int {
	n := 0
	for _, e := range g.busy {
		if g.class(e, now) == c {
			for p := range e.inFlight {
				if !p.probe {
					n++
				}
			}
		}
	}
	return n
}

// probes counts the probes in flight to endpoints not vouched for.
func (g *sendGate) probes() int { return g.countProbes(false) }

// vouchedProbes counts the probes in flight to vouched endpoints.
func (g *sendGate) vouchedProbes() int { return g.countProbes(true) }

func (g *sendGate) countProbes(vouched bool) int {
	n := 0
	for _, e := range g.busy {
		for p := range e.inFlight {
			if p.probe && p.vouched == vouched {
				n++
			}
		}
	}
	return n
}

// sending marks the start of p's HTTP request: from now on it counts as the endpoint's.
func (g *sendGate) sending(p *gatePass) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p.sending = g.now()
}

// sent learns the duration of p's finished HTTP request and gives back its place: writing the
// outcome waits for our own database, not for the endpoint.
func (g *sendGate) sent(p *gatePass, took time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p.sending = time.Time{}
	e := g.endpoints[p.sub]
	e.learned = g.now()
	if p.probe { // what was known before, if anything, lapsed: start afresh
		e.ewma = max(took, time.Nanosecond)
	} else {
		e.ewma = time.Duration(ewmaWeight*float64(took) + (1-ewmaWeight)*float64(e.ewma))
	}
	g.giveBack(p, e)
}

// release gives back the place the gate gave p, unless its request already did (sent).
func (g *sendGate) release(p *gatePass) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.giveBack(p, g.endpoints[p.sub])
}

func (g *sendGate) giveBack(p *gatePass, e *endpointLoad) {
	if e == nil { // given back and forgotten since
		return
	}
	delete(e.inFlight, p)
	if len(e.inFlight) == 0 {
		delete(g.busy, p.sub)
	}
	g.serveQueue(p.sub, e)
}

// serveQueue hands the endpoint's free places to its queue's head, one waiter after another.
func (g *sendGate) serveQueue(sub uuid.UUID, e *endpointLoad) {
	now := g.now()
	for len(e.queue) > 0 {
		w := e.queue[0]
		p, _ := g.place(sub, e, w.vouched, now)
		if p == nil {
			return
		}
		e.queue = slices.Delete(e.queue, 0, 1)
		w.pass <- p
	}
}
