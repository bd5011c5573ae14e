package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiptKey identifies one expected delivery: an event at one endpoint (one subscription).
type receiptKey struct {
	Endpoint  string
	WebhookID string
}

// webhookReceiver is the customer's endpoint: it verifies every request with the Standard
// Webhooks reference library and counts receipts per (endpoint, webhook-id).
type webhookReceiver struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	verifiers map[string]*standardwebhooks.Webhook
	count     map[receiptKey]int
	first     map[receiptKey]time.Time
	types     map[receiptKey]string
	total     int
	badSigs   []string
	delay     time.Duration
}

func newWebhookReceiver(t *testing.T) *webhookReceiver {
	t.Helper()
	w := &webhookReceiver{
		t:         t,
		verifiers: map[string]*standardwebhooks.Webhook{},
		count:     map[receiptKey]int{},
		first:     map[receiptKey]time.Time{},
		types:     map[receiptKey]string{},
	}
	w.srv = httptest.NewServer(http.HandlerFunc(w.handle))
	t.Cleanup(w.srv.Close)
	return w
}

// URL of one endpoint; each subscription gets its own.
func (w *webhookReceiver) URL(endpoint string) string { return w.srv.URL + "/hooks/" + endpoint }

// Trust registers the secret that signs requests to endpoint.
func (w *webhookReceiver) Trust(endpoint, secret string) {
	w.t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		w.t.Fatalf("secret of %s: %v", endpoint, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verifiers[endpoint] = wh
}

// SetDelay makes every answer wait, so that more deliveries are in flight when a fault hits.
func (w *webhookReceiver) SetDelay(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.delay = d
}

func (w *webhookReceiver) handle(rw http.ResponseWriter, r *http.Request) {
	endpoint := strings.TrimPrefix(r.URL.Path, "/hooks/")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(rw, "read", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	verifier, delay := w.verifiers[endpoint], w.delay
	w.mu.Unlock()
	id := r.Header.Get("webhook-id")
	if verifier == nil || verifier.Verify(body, r.Header) != nil {
		w.mu.Lock()
		w.badSigs = append(w.badSigs, endpoint+"/"+id)
		w.mu.Unlock()
		http.Error(rw, "bad signature", http.StatusUnauthorized)
		return
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	var envelope struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &envelope)
	typ := envelope.Type
	key := receiptKey{Endpoint: endpoint, WebhookID: id}
	w.mu.Lock()
	w.count[key]++
	w.total++
	if w.count[key] == 1 {
		w.first[key] = time.Now()
		w.types[key] = typ
	}
	w.mu.Unlock()
	rw.WriteHeader(http.StatusNoContent)
}

// Unique is the number of distinct (endpoint, webhook-id) received.
func (w *webhookReceiver) Unique() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.count)
}

// Stats reports receipts against what was expected: lost = expected never received,
// duplicates = receipts beyond the first of each key, unexpected = keys nobody expected.
type receiptStats struct {
	Expected, Unique, Total, Lost, Duplicates, Unexpected, BadSignatures int
	MissingSample                                                        []receiptKey
	DuplicatedKeys                                                       []receiptKey
}

func (w *webhookReceiver) Stats(expected map[receiptKey]bool) receiptStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := receiptStats{Expected: len(expected), Unique: len(w.count), Total: w.total, BadSignatures: len(w.badSigs)}
	for k := range expected {
		if w.count[k] == 0 {
			s.Lost++
			if len(s.MissingSample) < 10 {
				s.MissingSample = append(s.MissingSample, k)
			}
		}
	}
	for k, n := range w.count {
		if !expected[k] {
			s.Unexpected++
		}
		if n > 1 {
			s.Duplicates += n - 1
			s.DuplicatedKeys = append(s.DuplicatedKeys, k)
		}
	}
	sort.Slice(s.DuplicatedKeys, func(i, j int) bool { return s.DuplicatedKeys[i].WebhookID < s.DuplicatedKeys[j].WebhookID })
	return s
}

// Count returns how often key was received and when first.
func (w *webhookReceiver) Count(k receiptKey) (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count[k], w.first[k]
}

// TypesAt lists the event types an endpoint received, with their counts.
func (w *webhookReceiver) TypesAt(endpoint string) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, typ := range w.types {
		if k.Endpoint == endpoint {
			out[typ]++
		}
	}
	return out
}

// WaitUnique waits until at least n distinct receipts arrived.
func (w *webhookReceiver) WaitUnique(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for w.Unique() < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
