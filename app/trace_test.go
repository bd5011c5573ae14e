package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keelson/keelson/platform/telemetry"
)

// TestOnePostedWebhookEventIsOneTraceThatIncludesTheSend follows one POST /api/v1/webhooks/events
// through the outbox, RabbitMQ and the delivery consumer to the signed POST: every span shares the
// request's trace id (given by the caller's traceparent), and the receiver gets no traceparent. The
// unit of work that stored the event serves a batch of requests: it is a trace of its own, linked to
// the request's.
func TestOnePostedWebhookEventIsOneTraceThatIncludesTheSend(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })

	var mu sync.Mutex
	var received []http.Header
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	tdbCfg := testConfig(t, "postgres://unused/x") // only for modules(); startTracedApp uses its own database
	mods, err := modules(tdbCfg)
	if err != nil {
		t.Fatal(err)
	}
	base := startTracedApp(t, mods, telemetry.Tracing{Provider: tp, Enabled: true})

	post := func(path, body string, header map[string]string) *http.Response {
		return postAsTestToken(t, base+path, body, header)
	}
	resp := post("/api/v1/webhooks/subscriptions", `{"url":"`+receiver.URL+`/hooks","event_types":["order.*"]}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("subscribe: %d", resp.StatusCode)
	}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	resp = post("/api/v1/webhooks/events", `{"type":"order.created","data":{"order_id":42}}`,
		map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
	var accepted struct{ Deliveries int }
	_ = json.NewDecoder(resp.Body).Decode(&accepted)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || accepted.Deliveries != 1 {
		t.Fatalf("post event: %d, %d deliveries", resp.StatusCode, accepted.Deliveries)
	}

	// The consumer span ends last (after the outcome is stored), so wait for every span.
	want := []string{"POST /api/v1/webhooks/events", "webhooks.delivery process", "webhook attempt", "webhook POST"}
	spans := map[string]sdktrace.ReadOnlySpan{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, s := range exporter.GetSpans().Snapshots() {
			if s.SpanContext().TraceID().String() == traceID {
				spans[s.Name()] = s
			}
		}
		missing := []string{}
		for _, name := range want {
			if spans[name] == nil {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the request's trace has no %v span; it has %d spans", missing, len(spans))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if process := spans["webhooks.delivery process"]; process.Parent().SpanID() != spans["POST /api/v1/webhooks/events"].SpanContext().SpanID() {
		t.Error("the consumer's span is not a child of the request's")
	}
	batches := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range exporter.GetSpans().Snapshots() {
		if s.Name() == "webhooks ingest batch" && len(s.Links()) == 1 && s.Links()[0].SpanContext.TraceID().String() == traceID {
			batches[s.SpanContext().TraceID().String()] = s
		}
	}
	if len(batches) != 1 {
		t.Fatalf("%d ingest batches link to the request's trace, want 1", len(batches))
	}
	for batchTrace := range batches {
		var inBatch []string
		for _, s := range exporter.GetSpans().Snapshots() {
			if s.SpanContext().TraceID().String() == batchTrace {
				inBatch = append(inBatch, s.Name())
			}
		}
		for _, name := range []string{"unit_of_work", "outbox publish"} {
			if !slices.Contains(inBatch, name) {
				t.Errorf("the batch's trace has no %s span: %v", name, inBatch)
			}
		}
	}
	attempt, client := spans["webhook attempt"], spans["webhook POST"]
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range attempt.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	if attrs["keelson.webhook.delivery_id"].AsString() == "" || attrs["keelson.webhook.attempt"].AsInt64() != 1 ||
		attrs["keelson.webhook.status"].AsString() != "succeeded" {
		t.Errorf("attempt span attributes: %v", attrs)
	}
	if client.Parent().SpanID() != attempt.SpanContext().SpanID() {
		t.Error("the HTTP client span is not a child of the attempt span")
	}

	mu.Lock()
	defer mu.Unlock()
	if len(received) == 0 {
		t.Fatal("the receiver got nothing")
	}
	for _, h := range received {
		if h.Get("traceparent") != "" || h.Get("tracestate") != "" {
			t.Fatalf("Keelson's trace context leaked to the customer's endpoint: %v", h)
		}
	}
}

// TestARequestThatEnqueuesAJobIsOneTraceThatIncludesTheJob posts a conversation message (which
// enqueues the assistant's reply job in its unit of work): the job's run is a span of the request's
// trace, a child of the unit of work that enqueued it.
func TestARequestThatEnqueuesAJobIsOneTraceThatIncludesTheJob(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	mods, err := modules(testConfig(t, "postgres://unused/x"))
	if err != nil {
		t.Fatal(err)
	}
	base := startTracedApp(t, mods, telemetry.Tracing{Provider: tp, Enabled: true})

	post := func(path, body string, header map[string]string) map[string]any {
		resp := postAsTestToken(t, base+path, body, header)
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
		}
		return out
	}
	conv := post("/api/v1/conversations", `{"title":"traced"}`, nil)
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	post("/api/v1/conversations/"+conv["id"].(string)+"/messages", `{"content":"hello"}`,
		map[string]string{"traceparent": "00-" + traceID + "-b7ad6b7169203331-01"})

	// The job's run: a child of the request's unit of work (the reply it writes has one of its own).
	var job sdktrace.ReadOnlySpan
	byID := map[string]sdktrace.ReadOnlySpan{}
	deadline := time.Now().Add(30 * time.Second)
	for job == nil {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the request's trace has spans %v, no job run", keys(byID))
		}
		time.Sleep(20 * time.Millisecond)
		for _, s := range exporter.GetSpans().Snapshots() {
			if s.SpanContext().TraceID().String() == traceID {
				byID[s.SpanContext().SpanID().String()] = s
				if s.Name() == "conversations.assistant_reply run" {
					job = s
				}
			}
		}
	}
	var chain []string
	for s := job; s != nil; s = byID[s.Parent().SpanID().String()] {
		chain = append(chain, s.Name())
	}
	if want := []string{"conversations.assistant_reply run", "unit_of_work", "POST /api/v1/conversations/:id/messages"}; strings.Join(chain, " < ") != strings.Join(want, " < ") {
		t.Errorf("the job's span and its ancestors: %v, want %v", chain, want)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// postAsTestToken POSTs a JSON body with the bootstrap token and any extra headers.
func postAsTestToken(t *testing.T, url, body string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
