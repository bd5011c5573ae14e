package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// agreement sends requests to one replica after asking the document it serves whether it allows them.
type agreement struct {
	t        *testing.T
	base     string
	contract *hosttest.Contract
}

// request builds a request with the bootstrap token; headers are name, value pairs.
func (a *agreement) request(method, path, body string, headers ...string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(a.t.Context(), method, a.base+"/api/v1"+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

func (a *agreement) send(req *http.Request) (int, []byte) {
	a.t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	a.contract.Check(a.t, req, resp.StatusCode, resp.Header, raw)
	return resp.StatusCode, raw
}

// allowed: the document allows the request and the server accepts it with want. Returns the body.
func (a *agreement) allowed(want int, method, path, body string, headers ...string) []byte {
	a.t.Helper()
	req := a.request(method, path, body, headers...)
	if err := a.contract.Allows(req); err != nil {
		a.t.Errorf("the document refuses %s %s %s: %v", method, path, body, err)
	}
	status, raw := a.send(req)
	if status != want {
		a.t.Errorf("the document allows %s %s %s, the server answered %d (want %d): %s", method, path, body, status, want, raw)
	}
	return raw
}

// refused: the document refuses the request and so does the server, with a 4xx.
func (a *agreement) refused(method, path, body string, headers ...string) {
	a.t.Helper()
	req := a.request(method, path, body, headers...)
	if err := a.contract.Allows(req); err == nil {
		a.t.Errorf("the document allows %s %s %s", method, path, body)
	}
	if status, raw := a.send(req); status < 400 || status >= 500 {
		a.t.Errorf("the server took %s %s %s: %d %s", method, path, body, status, raw)
	}
}

func idOf(t *testing.T, raw []byte) string {
	t.Helper()
	var v struct {
		ID    string `json:"id"`
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	if v.ID == "" && len(v.Items) > 0 {
		return v.Items[0].ID
	}
	if v.ID == "" {
		t.Fatalf("no id in %s", raw)
	}
	return v.ID
}

// TestWhatTheDocumentAllowsTheServerAcceptsAndWhatItRefusesTheServerRefuses sends requests the served
// OpenAPI document allows, each of its request bodies at its smallest and at its fullest, and
// requests it refuses: a generated client (sdk/go) and the server agree on every one.
func TestWhatTheDocumentAllowsTheServerAcceptsAndWhatItRefusesTheServerRefuses(t *testing.T) {
	_, env := securityEnv(t, nil)
	r := startReplica(t, "replica", env)
	a := &agreement{t: t, base: r.URL(), contract: hosttest.LoadContract(t, r.URL())}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	suffix := fmt.Sprint(time.Now().UnixNano())

	// Tenants and tokens.
	tenant := idOf(t, a.allowed(http.StatusCreated, "POST", "/admin/tenants", `{"name":"agree-`+suffix+`"}`))
	a.allowed(http.StatusCreated, "POST", "/admin/tokens", `{"scopes":["webhooks:read"]}`)
	token := idOf(t, a.allowed(http.StatusCreated, "POST", "/admin/tokens",
		`{"tenant":"agree-`+suffix+`","name":"ci","scopes":["webhooks:read","webhooks:write"],"expires_in":"30d"}`))
	a.allowed(http.StatusOK, "POST", "/admin/tokens/"+token+"/revoke", "")
	a.allowed(http.StatusOK, "POST", "/admin/tenants/"+tenant+"/disable", "")
	a.allowed(http.StatusOK, "POST", "/admin/tenants/"+tenant+"/enable", "")
	a.refused("POST", "/admin/tokens", `{"scopes":null}`)
	a.refused("POST", "/admin/tokens", `{}`)
	a.refused("POST", "/admin/tokens", `{"scopes":[]}`)

	// Conversations.
	conv := idOf(t, a.allowed(http.StatusCreated, "POST", "/conversations", `{"title":"Agreement"}`))
	a.allowed(http.StatusOK, "PATCH", "/conversations/"+conv, `{"title":"Renamed"}`)
	a.allowed(http.StatusOK, "PATCH", "/conversations/"+conv, `{"title":"`+strings.Repeat("é", 200)+`"}`)
	a.allowed(http.StatusCreated, "POST", "/conversations/"+conv+"/messages", `{"content":"hello"}`, "Idempotency-Key", "m-"+suffix)
	a.allowed(http.StatusOK, "GET", "/conversations/"+conv+"/messages?limit=200", "")
	a.refused("POST", "/conversations", `{"title":null}`)
	a.refused("PATCH", "/conversations/"+conv, `{"title":null}`)
	a.refused("POST", "/conversations/"+conv+"/messages", `{"content":null}`)
	a.refused("POST", "/conversations", `{"title":""}`)
	a.refused("POST", "/conversations", `{"title":"`+strings.Repeat("é", 201)+`"}`)
	a.refused("POST", "/conversations/"+conv+"/messages", `{"content":""}`)

	// Webhook subscriptions, at their smallest and their fullest.
	sub := idOf(t, a.allowed(http.StatusCreated, "POST", "/webhooks/subscriptions", `{"url":"`+receiver.URL+`/a","event_types":["*"]}`))
	full := idOf(t, a.allowed(http.StatusCreated, "POST", "/webhooks/subscriptions", `{"url":"`+receiver.URL+`/b","event_types":["order.*","invoice.paid"],`+
		`"description":"all of it","secret":"whsec_YWdyZWVtZW50LXRlc3Qtc2VjcmV0LW9mLTMyLWJ5dGVz","enabled":false,"headers":{"X-Team":"payments"},"rate_limit":10}`))
	a.allowed(http.StatusOK, "PATCH", "/webhooks/subscriptions/"+full, `{"description":"renamed","enabled":true,"event_types":["*"],"rate_limit":0}`)
	a.allowed(http.StatusOK, "POST", "/webhooks/subscriptions/"+full+"/pause", "")
	a.allowed(http.StatusOK, "POST", "/webhooks/subscriptions/"+full+"/resume", "")
	a.allowed(http.StatusOK, "POST", "/webhooks/subscriptions/"+full+"/rotate-secret", `{"expire_previous_in":"1h"}`)
	a.refused("POST", "/webhooks/subscriptions", `{"url":"`+receiver.URL+`/c","event_types":null}`)
	a.refused("POST", "/webhooks/subscriptions", `{"url":"`+receiver.URL+`/c","event_types":[]}`)
	a.refused("PATCH", "/webhooks/subscriptions/"+sub, `{"event_types":[]}`)

	// Events, deliveries and redelivery.
	a.allowed(http.StatusAccepted, "POST", "/webhooks/events", `{"type":"order.created","data":{"n":1}}`)
	a.allowed(http.StatusAccepted, "POST", "/webhooks/events", `{"id":"evt-`+suffix+`","type":"order.created","data":{"n":2}}`)
	a.refused("POST", "/webhooks/events", `{"type":"order.created","data":null}`)
	a.refused("POST", "/webhooks/events", `{"type":"order.created","data":[1]}`)
	var delivery string
	deadline := time.Now().Add(30 * time.Second)
	for delivery == "" {
		raw := a.allowed(http.StatusOK, "GET", "/webhooks/deliveries?subscription_id="+sub+"&limit=1", "")
		if bytes.Contains(raw, []byte(`"id"`)) {
			delivery = idOf(t, raw)
		} else if time.Now().After(deadline) {
			t.Fatalf("no delivery for the subscription after 30 s: %s", raw)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	a.allowed(http.StatusAccepted, "POST", "/webhooks/deliveries/"+delivery+"/redeliver", "")
	a.allowed(http.StatusAccepted, "POST", "/webhooks/subscriptions/"+sub+"/test", "")
	a.allowed(http.StatusNoContent, "DELETE", "/webhooks/subscriptions/"+full, "")
}
