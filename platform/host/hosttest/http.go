package hosttest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Response is an HTTP answer read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Problem is a problem+json body (RFC 9457, with Keelson's code and errors).
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail"`
	Code   string       `json:"code"`
	Errors []FieldError `json:"errors"`
}

// FieldError is one entry of a validation problem's errors.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Do sends an authenticated request to the replica's API.
// body: nil (none), a string or []byte (sent as is) or a value (sent as JSON); with a body the
// Content-Type is application/json. headers are name, value pairs; an empty value removes the header.
func (r *Replica) Do(t testing.TB, method, path string, body any, headers ...string) *Response {
	t.Helper()
	if len(headers)%2 != 0 {
		t.Fatalf("hosttest: headers must be name, value pairs: %q", headers)
	}
	var reader io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		reader = strings.NewReader(b)
	case []byte:
		reader = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("hosttest: marshal request body: %v", err)
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, r.URL+path, reader)
	if err != nil {
		t.Fatalf("hosttest: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("hosttest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("hosttest: read %s %s: %v", method, path, err)
	}
	contractOf(t, r.URL).Check(t, req, resp.StatusCode, resp.Header, raw)
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// Decode unmarshals a response body into a fresh T.
func Decode[T any](t testing.TB, r *Response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("hosttest: decode %T: %v; body: %s", v, err, r.Body)
	}
	return v
}
