package webhooks

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/modules/webhooks/contract"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/tenancy"
)

func TestEventsPublishedTogetherShareOneUnitOfWorkAndEachCallerGetsItsOwnAnswer(t *testing.T) {
	const n = 40
	h := newHarness(t, testConfig(), harnessOptions{})
	recorder, _ := h.recordSpans()
	h.subscribe("http://127.0.0.1:9/a", "order.*")
	h.subscribe("http://127.0.0.1:9/b", "order.created")
	stored, err := h.svc.PublishEvent(tenantContext(), EventInput{ID: "stored", Type: "order.created", Data: []byte(`{"n":0}`)})
	require.NoError(t, err)
	require.Equal(t, 2, stored.Deliveries)

	// The tenant's row, held FOR UPDATE, stops the next batch at its event insert (the events' key
	// to their tenant): every event published meanwhile queues for the batch after it.
	hold := h.db.Gorm().Begin()
	t.Cleanup(func() { hold.Rollback() })
	require.NoError(t, hold.Exec(`SELECT 1 FROM tenants WHERE id = ? FOR UPDATE`, tenancy.DefaultID).Error)

	type call struct {
		in    EventInput
		trace trace.TraceID
		out   Ingested
		err   error
	}
	calls := make([]*call, 0, n+4)
	for i := range n {
		eventType := "order.created"
		if i%2 == 1 {
			eventType = "order.updated" // one delivery, not two
		}
		calls = append(calls, &call{in: EventInput{ID: fmt.Sprintf("e-%d", i), Type: eventType, Data: []byte(`{"n":1}`)}})
	}
	calls = append(calls,
		&call{in: EventInput{ID: "stored", Type: "order.created", Data: []byte(`{ "n" : 0 }`)}}, // a duplicate
		&call{in: EventInput{ID: "stored", Type: "order.created", Data: []byte(`{"n":9}`)}},     // the id reused
		&call{in: EventInput{ID: "twin", Type: "order.created", Data: []byte(`{"n":2}`)}},       // twice in one batch
		&call{in: EventInput{ID: "twin", Type: "order.created", Data: []byte(`{"n":2}`)}},
	)
	var wg sync.WaitGroup
	run := func(c *call, i int) {
		c.trace = trace.TraceID{byte(i + 1), 0xee}
		ctx := trace.ContextWithSpanContext(tenantContext(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: c.trace, SpanID: trace.SpanID{byte(i + 1)}, TraceFlags: trace.FlagsSampled}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.out, c.err = h.svc.PublishEvent(ctx, c.in)
		}()
	}
	queued := func() int {
		n, _ := h.svc.ingests.State()
		return n
	}
	run(calls[0], 0)
	require.Eventually(t, func() bool { return queued() == 0 && batchRunning(h) }, 30*time.Second, 5*time.Millisecond,
		"the first batch is being written")
	for i, c := range calls[1:] {
		run(c, i+1)
	}
	require.Eventually(t, func() bool { return queued() == len(calls)-1 }, 30*time.Second, 5*time.Millisecond,
		"every other event queued")
	require.NoError(t, hold.Rollback().Error)
	wg.Wait()

	for i, c := range calls[:n] {
		require.NoError(t, c.err, "event %d", i)
		assert.Equal(t, Ingested{ID: c.in.ID, Type: c.in.Type, Deliveries: 2 - i%2}, c.out, "event %d", i)
	}
	dup, reused, twin1, twin2 := calls[n], calls[n+1], calls[n+2], calls[n+3]
	require.NoError(t, dup.err)
	assert.Equal(t, Ingested{ID: "stored", Type: "order.created", Deliveries: 2, Duplicate: true}, dup.out)
	var conflict *apperr.StateConflictError
	require.ErrorAs(t, reused.err, &conflict)
	assert.Equal(t, CodeEventIDReused, conflict.Code)
	require.NoError(t, twin1.err)
	require.NoError(t, twin2.err)
	assert.Equal(t, 2, twin1.out.Deliveries)
	assert.Equal(t, 2, twin2.out.Deliveries)
	assert.True(t, twin1.out.Duplicate != twin2.out.Duplicate, "one copy stored the event, the other found it")

	// The first "stored", the held batch, then every event queued meanwhile but the second copies of
	// "stored" and "twin", deferred to the next batch; the answers for "stored" were then given alone.
	var sizes []int64
	for _, s := range recorder.Ended() {
		if s.Name() == "webhooks ingest batch" {
			for _, a := range s.Attributes() {
				if a.Key == "keelson.webhook.batch_size" {
					sizes = append(sizes, a.Value.AsInt64())
				}
			}
		}
	}
	assert.Equal(t, []int64{1, 1, int64(len(calls) - 3), 2}, sizes)

	// Every event's delivery request (one for all its deliveries) continues the trace of the call that published it.
	traceOf := map[string]string{}
	for _, c := range calls[:n] {
		traceOf[c.in.ID] = c.trace.String()
	}
	var rows []struct{ Event, Envelope string }
	require.NoError(t, h.db.Gorm().Raw(`SELECT d.event_id AS event, o.payload::text AS envelope FROM outbox_messages o
		JOIN webhook_deliveries d ON d.id = ((convert_from(decode(o.payload->>'payload', 'base64'), 'UTF8'))::jsonb->'deliveries'->0->>'delivery_id')::uuid
		WHERE d.event_id LIKE 'e-%'`).Scan(&rows).Error)
	require.Len(t, rows, n)
	for _, r := range rows {
		var env struct {
			DestinationTopic string            `json:"destination_topic"`
			Metadata         map[string]string `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Envelope), &env))
		require.Equal(t, contract.DeliveriesRequested, env.DestinationTopic)
		assert.True(t, strings.Contains(env.Metadata["traceparent"], traceOf[r.Event]),
			"event %s: traceparent %q, want trace %s", r.Event, env.Metadata["traceparent"], traceOf[r.Event])
	}
}

func batchRunning(h *harness) bool {
	_, running := h.svc.ingests.State()
	return running
}
