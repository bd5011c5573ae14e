package webhooks

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// sendGate shares one replica's sending capacity (its delivery handlers) among endpoints, so slow or
// dead endpoints cannot take it all. Each endpoint is, on this replica:
//   - fast: its recent sends took less than slowAfter and none in flight has run longer — up to
//     perEndpoint sends in flight;
//   - unknown: no send finished yet — one probe at a time; probes of all endpoints within a quarter
//     of the capacity, each counted as a probe until it ends, however long it runs;
//   - slow: otherwise — up to slowPerEndpoint sends, slow sends of all endpoints within half the
//     capacity.
//
// So at least a quarter of the handlers stays for endpoints known to be fast whatever the others do;
// a new endpoint waits for a probe place while many new ones hang. A refused request is put back to
// wait without spending an attempt.
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
}

// endpointLoad is what the gate knows of one subscription's endpoint on this replica.
type endpointLoad struct {
	inFlight map[*gatePass]struct{}
	ewma     time.Duration // smoothed duration of its sends; 0 until one finished
}

// gatePass is one admitted send; release it when the send is over.
type gatePass struct {
	sub     uuid.UUID
	started time.Time
	probe   bool // the first send to an unknown endpoint: counts against probeCap until it ends
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
		if now.Sub(p.started) > g.slowAfter {
			return classSlow
		}
	}
	switch {
	case e.ewma < g.slowAfter:
		return classFast
	default:
		return classSlow
	}
}

// briefWait is how young an endpoint's probe may be, or how fast its average, for a refused request
// to wait a moment for a place instead of being put back: a burst to an endpoint that answers quickly
// then goes through at once, while requests for hanging endpoints leave their handlers at once.
const briefWait = 250 * time.Millisecond

// admit lets a send to sub start, or says how long to put it back for and whether a place is likely
// to free within briefWait.
func (g *sendGate) admit(sub uuid.UUID) (*gatePass, time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	e := g.endpoints[sub]
	if e == nil {
		e = &endpointLoad{inFlight: map[*gatePass]struct{}{}}
		g.endpoints[sub] = e
	}
	n := len(e.inFlight)
	switch g.class(e, now) {
	case classFast:
		if n >= g.perEndpoint {
			return nil, max(e.ewma, 50*time.Millisecond), e.ewma < briefWait
		}
	case classUnknown:
		if n >= 1 || g.probes() >= g.probeCap {
			young := false
			for p := range e.inFlight {
				young = now.Sub(p.started) < briefWait
			}
			return nil, g.slowAfter, young
		}
	case classSlow:
		if n >= g.slowPerEndpoint || g.inFlightOf(classSlow, now) >= g.slowCap {
			return nil, max(e.ewma, g.slowAfter), false
		}
	}
	p := &gatePass{sub: sub, started: now, probe: e.ewma == 0}
	e.inFlight[p] = struct{}{}
	g.busy[sub] = e
	return p, 0, false
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

// probes counts the probes in flight.
func (g *sendGate) probes() int {
	n := 0
	for _, e := range g.busy {
		for p := range e.inFlight {
			if p.probe {
				n++
			}
		}
	}
	return n
}

// release ends a send admitted by admit and learns its duration.
func (g *sendGate) release(p *gatePass) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.endpoints[p.sub]
	delete(e.inFlight, p)
	if len(e.inFlight) == 0 {
		delete(g.busy, p.sub)
	}
	took := g.now().Sub(p.started)
	if e.ewma == 0 {
		e.ewma = max(took, time.Nanosecond)
	} else {
		e.ewma = time.Duration(ewmaWeight*float64(took) + (1-ewmaWeight)*float64(e.ewma))
	}
}
