package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/host/hosttest"
)

const apiToken = "blackbox-token"

// apiClient speaks the HTTP API of one replica; every answer it reads is checked against the
// OpenAPI document the replicas serve, so the black-box tests also prove the contract.
type apiClient struct {
	base     string
	http     *http.Client
	t        testing.TB
	contract *hosttest.Contract
}

func newAPIClient(t testing.TB, contract *hosttest.Contract, base string) *apiClient {
	return &apiClient{base: base, http: &http.Client{Timeout: 10 * time.Second}, t: t, contract: contract}
}

// do sends a JSON request to /api/v1 and decodes a JSON answer into out (when not nil).
func (c *apiClient) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/api/v1"+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	c.contract.Check(c.t, req, resp.StatusCode, resp.Header, raw)
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode %s: %w", method, path, raw, err)
		}
	}
	return resp.StatusCode, nil
}

type subscription struct {
	ID         string   `json:"id"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
	Secret     string   `json:"secret"`
	Enabled    bool     `json:"enabled"`
}

// subscribe creates a subscription and returns it with its secret.
func (c *apiClient) subscribe(t *testing.T, target string, eventTypes []string, enabled bool) subscription {
	t.Helper()
	var s subscription
	in := map[string]any{"url": target, "event_types": eventTypes, "enabled": enabled, "description": "black-box test"}
	if _, err := c.do(context.Background(), http.MethodPost, "/webhooks/subscriptions", in, &s); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	if s.ID == "" || s.Secret == "" {
		t.Fatalf("create subscription returned %+v", s)
	}
	return s
}

type eventAccepted struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Deliveries int    `json:"deliveries"`
}

// postEvent ingests one event with a client-chosen id (so a retry is idempotent).
func (c *apiClient) postEvent(ctx context.Context, id, eventType string, data map[string]any) (eventAccepted, error) {
	var out eventAccepted
	_, err := c.do(ctx, http.MethodPost, "/webhooks/events", map[string]any{"id": id, "type": eventType, "data": data}, &out)
	return out, err
}

type delivery struct {
	ID             string `json:"id"`
	SubscriptionID string `json:"subscription_id"`
	EventID        string `json:"event_id"`
	EventType      string `json:"event_type"`
	Status         string `json:"status"`
	AttemptCount   int    `json:"attempt_count"`
	Attempts       []struct {
		Number     int    `json:"number"`
		Trigger    string `json:"trigger"`
		StatusCode *int   `json:"status_code"`
		Error      string `json:"error"`
	} `json:"attempts"`
}

// deliveries lists every delivery matching the filters (all pages).
func (c *apiClient) deliveries(ctx context.Context, filters url.Values) ([]delivery, error) {
	var all []delivery
	q := url.Values{}
	for k, v := range filters {
		q[k] = v
	}
	q.Set("limit", "200")
	for {
		var page struct {
			Items      []delivery `json:"items"`
			NextCursor *string    `json:"next_cursor"`
		}
		if _, err := c.do(ctx, http.MethodGet, "/webhooks/deliveries?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// delivery returns one delivery with its attempts.
func (c *apiClient) delivery(ctx context.Context, id string) (delivery, error) {
	var d delivery
	_, err := c.do(ctx, http.MethodGet, "/webhooks/deliveries/"+id, nil, &d)
	return d, err
}

// metric returns the sum of every sample of a Prometheus metric family on /metrics (no auth).
func (c *apiClient) metric(ctx context.Context, family string, labelContains string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return sumMetric(string(raw), family, labelContains), nil
}
