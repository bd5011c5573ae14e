package webhooks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzAFilterIsRefusedWithAPositionOrEvaluatesWithinItsCost: any text saved as a filter either compiles
// or is refused with a message (naming a position unless a whole-expression limit was hit), and a
// compiled filter evaluated on any event's data ends in a bool or an error, within the cost limit.
// The same text as a transformation likewise: refused, or a JSON object or an error, never a panic.
func FuzzAFilterIsRefusedWithAPositionOrEvaluatesWithinItsCost(f *testing.F) {
	for _, seed := range []struct{ expr, data string }{
		{`data.amount > 100 && data.currency == "EUR"`, `{"amount":150,"currency":"EUR"}`},
		{`has(data.items) && data.items.exists(i, i.sku.startsWith("a"))`, `{"items":[{"sku":"ab"},{"sku":1}]}`},
		{`data.items.all(x, data.items.all(y, x + y >= 0))`, `{"items":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}`},
		{`type.matches("^order\\.(created|paid)$") || timestamp > timestamp("2026-01-01T00:00:00Z")`, `{}`},
		{`data["k"] == null`, `{"k":null}`},
		{`size(data) > 1 ? 1 : "x"`, `{}`},
		{`data.amount >`, `{}`},
		{`int(data.n) / 0 == 1`, `{"n":1e300}`},
		{"\"a\x00\"", `{}`},
		{strings.Repeat("[", 70) + strings.Repeat("]", 70) + " == []", `{}`},
		{`{"kind": type, "total": data.amount, "at": timestamp, "b": b"\xff", "n": 1.0/0.0}`, `{"amount":1}`},
		{`{"m": {1: 2}, "u": 1u, "d": duration("1s"), "l": [data, null]}`, `{"x":[1,{"y":null}]}`},
		{`data`, `{"nested":{"a":[1,2,3]}}`},
	} {
		f.Add(seed.expr, []byte(seed.data))
	}
	f.Fuzz(func(t *testing.T, expr string, data []byte) {
		if prg, err := compileExpression(expr, transformExpression); err == nil {
			var probe map[string]any
			d := data
			if json.Unmarshal(d, &probe) != nil {
				d = []byte(`{}`)
			}
			started := time.Now()
			body, err := transformEvent(prg, &eventRecord{ID: "evt_1", Type: "order.created", Data: d, CreatedAt: time.Unix(1_800_000_000, 0)})
			if err == nil && (len(body) == 0 || body[0] != '{' || !json.Valid(body)) {
				t.Fatalf("%q on %q produced %q, not a JSON object", expr, d, body)
			}
			if d := time.Since(started); d > 2*time.Second {
				t.Fatalf("transform %q ran %v: the cost limit did not hold", expr, d)
			}
		}
		prg, err := compileExpression(expr, filterExpression)
		if err != nil {
			msg := err.Error()
			if msg == "" {
				t.Fatalf("%q refused without a message", expr)
			}
			if !strings.HasPrefix(msg, "line ") && !strings.HasPrefix(msg, "must ") && !strings.Contains(msg, "limit exceeded") {
				t.Fatalf("%q refused without a position: %s", expr, msg)
			}
			return
		}
		var probe map[string]any
		if json.Unmarshal(data, &probe) != nil {
			data = []byte(`{}`)
		}
		in, err := newExpressionInput("evt_1", "order.created", time.Unix(1_800_000_000, 0), data)
		if err != nil {
			t.Fatalf("data %q: %v", data, err)
		}
		started := time.Now()
		_, _ = filterMatches(prg, in)
		if d := time.Since(started); d > 2*time.Second {
			t.Fatalf("%q on %q ran %v: the cost limit did not hold", expr, data, d)
		}
	})
}
