package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
// request's trace id (given by the caller's traceparent), and the receiver gets no traceparent.
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
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewBufferString(body))
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
	want := []string{"POST /api/v1/webhooks/events", "unit_of_work", "outbox publish", "webhooks.delivery process",
		"webhook attempt", "webhook POST"}
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
