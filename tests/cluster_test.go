package tests

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// brokerURL is the RabbitMQ the replicas use (TEST_AMQP_URL overrides it).
func brokerURL() string {
	if u := os.Getenv("TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// Timings short enough for tests, and a failed attempt is retried many times before a delivery
// could be given up. The lease bounds how long a delivery whose sender died stays taken; it runs
// from the claim (at ingestion), so it must also exceed the longest wait of a delivery in the
// queue (well under a second at the tests' 200 deliveries/s), or the sweep re-claims deliveries
// that are merely queued.
const (
	testSendTimeout   = 2 * time.Second
	testClaimLease    = 10 * time.Second
	testSweepInterval = 300 * time.Millisecond
	testRetrySchedule = "300ms,500ms,1s,1s,2s,2s,2s,2s,2s,2s,2s,2s"
)

// cluster is a fresh database, migrated by the binary, and two replicas on one isolated broker namespace.
type cluster struct {
	t        *testing.T
	contract *hosttest.Contract // the document replica 1 served at start
	db       *emptyDatabase
	env      map[string]string
	replicas []*replica
	receiver *webhookReceiver
}

type clusterOptions struct {
	AMQPURL  string // default brokerURL(); the broker-cut test points it at a proxy
	Replicas int    // default 2
}

func newCluster(t *testing.T, opts clusterOptions) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("black-box cluster tests need PostgreSQL, RabbitMQ and a few seconds")
	}
	if opts.AMQPURL == "" {
		opts.AMQPURL = brokerURL()
	}
	if opts.Replicas == 0 {
		opts.Replicas = 2
	}
	db := newEmptyDatabase(t)
	ns := newNamespace() // isolates this test's exchange and queues on the shared broker
	env := map[string]string{
		"DATABASE_URL":                   db.URL,
		"AMQP_URL":                       opts.AMQPURL,
		"AMQP_EXCHANGE":                  ns,
		"AMQP_QUEUE_PREFIX":              ns,
		"API_TOKENS":                     apiToken,
		"WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",
		"WEBHOOKS_SEND_TIMEOUT":          testSendTimeout.String(),
		"WEBHOOKS_CLAIM_LEASE":           testClaimLease.String(),
		"WEBHOOKS_SWEEP_INTERVAL":        testSweepInterval.String(),
		"WEBHOOKS_RETRY_SCHEDULE":        testRetrySchedule,
		"LOG_LEVEL":                      "info",
		"LOG_FORMAT":                     "json",
	}
	if dbtest.Pooled() { // make test-pgbouncer: the replicas and the migration reach the database through PgBouncer
		env["DATABASE_URL"], env["DATABASE_TRANSACTION_POOLING"] = dbtest.StartPgBouncer(t, db.Name), "true"
	}
	runMigrate(t, env)
	c := &cluster{t: t, db: db, env: env, receiver: newWebhookReceiver(t)}
	for i := range opts.Replicas {
		c.replicas = append(c.replicas, startReplica(t, fmt.Sprintf("replica%d", i+1), env))
	}
	c.contract = hosttest.LoadContract(t, c.replicas[0].URL())
	return c
}

// api is a client of replica i.
func (c *cluster) api(i int) *apiClient { return newAPIClient(c.t, c.contract, c.replicas[i].URL()) }

// subscribe creates a subscription to endpoint (a path of the receiver) and trusts its secret.
func (c *cluster) subscribe(endpoint string, eventTypes []string, enabled bool) subscription {
	c.t.Helper()
	s := c.api(0).subscribe(c.t, c.receiver.URL(endpoint), eventTypes, enabled)
	c.receiver.Trust(endpoint, s.Secret)
	return s
}

// loadRun posts events to every replica in turn, retrying a failed post on the next replica with
// the same event id (ingestion is idempotent on it), until each was accepted.
type loadRun struct {
	c        *cluster
	expected map[receiptKey]bool
	events   int
	rate     int // events/s offered; 0 = as fast as the posters go
	accepted atomic.Int64
	retried  atomic.Int64

	mu         sync.Mutex
	acceptedAt map[string]time.Time
	done       chan error
	cancel     context.CancelFunc
}

// startLoad posts events of type eventType with ids prefix-0…prefix-(n-1) at rate events/s; each
// is expected at every endpoint.
func (c *cluster) startLoad(prefix, eventType string, n, rate int, endpoints []string) *loadRun {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	l := &loadRun{c: c, expected: map[receiptKey]bool{}, events: n, rate: rate, done: make(chan error, 1), cancel: cancel,
		acceptedAt: map[string]time.Time{}}
	ids := make(chan string)
	var all []string
	for i := range n {
		id := fmt.Sprintf("%s-%05d", prefix, i)
		all = append(all, id)
		for _, e := range endpoints {
			l.expected[receiptKey{Endpoint: e, WebhookID: id}] = true
		}
	}
	c.t.Cleanup(cancel)
	go func() { // the pace: one id per tick
		defer close(ids)
		var tick <-chan time.Time
		if rate > 0 {
			ticker := time.NewTicker(time.Second / time.Duration(rate))
			defer ticker.Stop()
			tick = ticker.C
		}
		for _, id := range all {
			if tick != nil {
				select {
				case <-tick:
				case <-ctx.Done():
					return
				}
			}
			select {
			case ids <- id:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		var wg sync.WaitGroup
		var firstErr error
		var mu sync.Mutex
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range ids {
					if err := l.post(ctx, w, id, eventType, len(endpoints)); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
		l.done <- firstErr
	}()
	return l
}

func (l *loadRun) post(ctx context.Context, worker int, id, eventType string, wantDeliveries int) error {
	for attempt := 0; ; attempt++ {
		r := l.c.replicas[(worker+attempt)%len(l.c.replicas)]
		got, err := newAPIClient(l.c.t, l.c.contract, r.URL()).postEvent(ctx, id, eventType, map[string]any{"seq": id})
		if err == nil {
			if got.ID != id || got.Deliveries != wantDeliveries {
				return fmt.Errorf("event %s accepted as %+v, want %d deliveries", id, got, wantDeliveries)
			}
			l.accepted.Add(1)
			l.mu.Lock()
			l.acceptedAt[id] = time.Now()
			l.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("event %s never accepted: %w", id, err)
		}
		var status int
		if _, scanErr := fmt.Sscanf(errorStatus(err), "%d", &status); scanErr == nil && status >= 400 && status < 500 {
			return fmt.Errorf("event %s refused: %w", id, err)
		}
		l.retried.Add(1)
		time.Sleep(50 * time.Millisecond) // the replica is down or restarting: try the next one
	}
}

// errorStatus extracts the status code written by apiClient.do ("POST /x: 503 …"), or "".
func errorStatus(err error) string {
	_, rest, ok := strings.Cut(err.Error(), ": ")
	if !ok {
		return ""
	}
	code, _, _ := strings.Cut(rest, " ")
	return code
}

// AcceptedAt is when the event was accepted (its deliveries were born claimed then).
func (l *loadRun) AcceptedAt(id string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acceptedAt[id]
}

// waitProgress waits until a fraction of the expected deliveries arrived.
func (l *loadRun) waitProgress(fraction float64) {
	l.c.t.Helper()
	want := int(fraction * float64(len(l.expected)))
	if !l.c.receiver.WaitUnique(want, 2*time.Minute) {
		l.c.t.Fatalf("only %d of %d deliveries arrived before the fault", l.c.receiver.Unique(), want)
	}
}

// finish waits until every event was accepted, every expected delivery received, and the API
// reports every delivery succeeded; then the receipts are final and are returned.
func (l *loadRun) finish(alive int) receiptStats {
	t := l.c.t
	t.Helper()
	if err := <-l.done; err != nil {
		t.Fatalf("load: %v", err)
	}
	l.c.receiver.WaitUnique(len(l.expected), 2*time.Minute)
	api := l.c.api(alive)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		succeeded, err := api.deliveries(ctx, url.Values{"status": {"succeeded"}})
		cancel()
		if err == nil && len(succeeded) >= len(l.expected) {
			break
		}
		if time.Now().After(deadline) {
			s := l.c.receiver.Stats(l.expected)
			t.Fatalf("deliveries never all succeeded: %d succeeded (err %v); receiver lost=%d duplicates=%d missing e.g. %v",
				len(succeeded), err, s.Lost, s.Duplicates, s.MissingSample)
		}
		time.Sleep(500 * time.Millisecond)
	}
	s := l.c.receiver.Stats(l.expected)
	if s.BadSignatures > 0 {
		t.Errorf("%d requests had a signature that does not verify", s.BadSignatures)
	}
	if s.Unexpected > 0 {
		t.Errorf("%d receipts nobody expected", s.Unexpected)
	}
	if s.Lost > 0 {
		t.Errorf("lost = %d of %d, e.g. %v", s.Lost, s.Expected, s.MissingSample)
	}
	return s
}

// waitReadyz waits until replica i's /readyz answers want.
func (c *cluster) waitReadyz(i, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		code, err := c.replicas[i].readyz()
		if code == want {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("%s /readyz answered %d, want %d", c.replicas[i].name, code, want), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
