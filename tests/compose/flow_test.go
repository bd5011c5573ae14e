//go:build compose

package compose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	token  = "dev-token"
	secret = "whsec_a2VlbHNvbi1kZW1vLXNlY3JldC1kby1ub3QtcmV1c2U="
)

var client = &http.Client{Timeout: 5 * time.Second}

// post sends a JSON request to the API of a replica and returns the status; a non-empty key is sent
// as Idempotency-Key, so a request repeated after a timeout takes effect once.
func post(base, path, key string, body any) (int, []byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1"+path, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), nil
}

// subscribeLoad subscribes the receiver to the load's events through app1, sending the request again
// (same Idempotency-Key, so one subscription) while a busy replica answers late or not at all.
func (s *stack) subscribeLoad() {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		status, body, err := post(s.urls["app1"], "/webhooks/subscriptions", "subscribe-load-"+s.project, map[string]any{
			"url": "http://receiver:9000/hooks", "event_types": []string{"load.*"}, "secret": secret})
		if err == nil && status == http.StatusCreated {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("subscribe the load: %d %v %s", status, err, body)
		}
		time.Sleep(time.Second)
	}
}

// load publishes n events of one phase through the given replicas, 8 at a time. An event whose
// request fails is sent again, with the same id, to the next replica until one accepts it (202, or
// 200 when an earlier attempt was stored after all). onPublished runs once after the given count.
func (s *stack) load(phase string, n int, replicas []string, at int, onPublished func()) []string {
	return s.loadPaced(phase, n, replicas, pace{}, at, onPublished)
}

// pace spreads a load over time, so a fault strikes while events flow however fast the machine is.
type pace struct {
	perSecond int // events sent a second at most; 0: as fast as the replicas take them
	holdFrom  int // events from this one on wait until the fault returned (> at); 0: none wait
}

// loadPaced is load at a pace: the events after the fault then go out with the fault in place.
func (s *stack) loadPaced(phase string, n int, replicas []string, p pace, at int, onPublished func()) []string {
	t := s.t
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%04d", phase, i)
	}
	var published, afterFault atomic.Int64
	faultDone := make(chan struct{})
	if onPublished == nil {
		close(faultDone)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, n)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := range next {
				deadline := time.Now().Add(3 * time.Minute)
				for attempt := 0; ; attempt++ {
					base := s.urls[replicas[(i+attempt)%len(replicas)]]
					status, body, err := post(base, "/webhooks/events", "", map[string]any{
						"id": ids[i], "type": "load." + phase, "data": map[string]int{"n": i}})
					if err == nil && (status == http.StatusAccepted || status == http.StatusOK) {
						break
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("event %s never accepted: %d %v %s", ids[i], status, err, body)
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				select {
				case <-faultDone:
					afterFault.Add(1)
				default:
				}
				if published.Add(1) == int64(at) && onPublished != nil {
					onPublished()
					close(faultDone)
				}
			}
		}(w)
	}
	began := time.Now()
	for i := range ids {
		if p.perSecond > 0 {
			time.Sleep(time.Until(began.Add(time.Duration(i) * time.Second / time.Duration(p.perSecond))))
		}
		if p.holdFrom > 0 && i == p.holdFrom {
			<-faultDone
		}
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if onPublished != nil {
		t.Logf("%s: %d of %d events accepted after the fault returned", phase, afterFault.Load(), n)
	}
	return ids
}

var receivedLine = regexp.MustCompile(`msg="webhook received".*webhook_id=(\S+).*verified=true`)

// received counts the verified deliveries per webhook id in the receiver's log.
func (s *stack) received() map[string]int {
	s.t.Helper()
	out := s.must(2*time.Minute, "docker", "logs", s.container("receiver"))
	counts := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if m := receivedLine.FindStringSubmatch(line); m != nil {
			counts[m[1]]++
		}
	}
	return counts
}

// outcome of one phase, as docs/operations.md reports it.
type outcome struct {
	phase            string
	events, lost     int
	duplicates       int
	allDeliveredIn   time.Duration // from the start of the phase until the last event arrived
	replicasRestored time.Duration // from the end of the fault until every replica was healthy again
}

// awaitDelivered waits until every id reached the receiver or the deadline passed.
func (s *stack) awaitDelivered(phase string, ids []string, start time.Time, timeout time.Duration) outcome {
	s.t.Helper()
	o := outcome{phase: phase, events: len(ids)}
	deadline := time.Now().Add(s.within(timeout))
	for {
		counts := s.received()
		o.lost, o.duplicates = 0, 0
		for _, id := range ids {
			switch c := counts[id]; {
			case c == 0:
				o.lost++
			case c > 1:
				o.duplicates += c - 1
			}
		}
		if o.lost == 0 || time.Now().After(deadline) {
			o.allDeliveredIn = time.Since(start)
			return o
		}
		time.Sleep(2 * time.Second)
	}
}

// readiness watches the replicas' /readyz from the moment of a fault, so the failover time is the
// replicas' own answer rather than when the test next looked.
type readiness struct {
	stop chan struct{}
	done chan map[string]time.Duration
}

// watchReady polls each replica's /readyz twice a second from now on.
func (s *stack) watchReady(replicas ...string) *readiness {
	r := &readiness{stop: make(chan struct{}), done: make(chan map[string]time.Duration, 1)}
	from := time.Now()
	probe := &http.Client{Timeout: 2 * time.Second}
	go func() {
		recovered := map[string]time.Duration{} // until the first 200 after the last failed probe
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.stop:
				r.done <- recovered
				return
			case <-tick.C:
			}
			for _, replica := range replicas {
				ok := false
				if resp, err := probe.Get(s.urls[replica] + "/readyz"); err == nil {
					ok = resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
				if !ok {
					recovered[replica] = -1 // not ready now
				} else if recovered[replica] < 0 {
					recovered[replica] = time.Since(from)
				}
			}
		}
	}()
	return r
}

// outage ends the watch: the longest time a replica needed to answer ready again after the fault
// (0 when none ever answered otherwise), and whether one was still not ready at the end.
func (r *readiness) outage() (longest time.Duration, stillDown []string) {
	close(r.stop)
	for replica, d := range <-r.done {
		if d < 0 {
			stillDown = append(stillDown, replica)
		}
		longest = max(longest, d)
	}
	return longest, stillDown
}
