package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/httpapi"
)

// unknownLength hides the size of a body so the client sends it chunked, without Content-Length.
type unknownLength struct{ io.Reader }

func TestOversizeChunkedBodyIs413(t *testing.T) {
	srv := newServer(t)
	body := unknownLength{strings.NewReader(`{"name":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}`)}
	res := srv.do(t, "POST", "/api/v1/things", token, body, map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusRequestEntityTooLarge, res.status, string(res.body))
	assert.Equal(t, "payload_too_large", res.problem.Code)

	// Just under the limit is accepted.
	ok := unknownLength{strings.NewReader(`{"name":"` + strings.Repeat("a", httpapi.MaxBodyBytes-20) + `"}`)}
	res = srv.do(t, "POST", "/api/v1/things", token, ok, map[string]string{"Content-Type": "application/json"})
	assert.Equal(t, http.StatusCreated, res.status, res.problem.Detail)
}

func TestInternalErrorsAreMaskedButLogged(t *testing.T) {
	srv := newServer(t)
	res := srv.do(t, "GET", "/api/v1/boom", token, nil, nil)
	require.Equal(t, http.StatusInternalServerError, res.status)
	assert.Contains(t, srv.logs.String(), "secret internals")
	assert.Contains(t, srv.logs.String(), res.header.Get("X-Request-Id"))

	res = srv.do(t, "GET", "/api/v1/panic", token, nil, nil)
	require.Equal(t, http.StatusInternalServerError, res.status)
	logs := srv.logs.String()
	assert.Contains(t, logs, "handler exploded")
	assert.Contains(t, logs, "runtime/debug.Stack", "the panic is logged with its stack")

	// The server survives the panic.
	res = srv.do(t, "GET", "/api/v1/things/"+uuid.NewString(), token, nil, nil)
	assert.Equal(t, http.StatusOK, res.status)
}

func TestRequestID(t *testing.T) {
	srv := newServer(t)

	res := srv.do(t, "GET", "/api/v1/things/"+uuid.NewString(), token, nil, map[string]string{"X-Request-Id": "client-id-1"})
	assert.Equal(t, "client-id-1", res.header.Get("X-Request-Id"), "a sane id is reused")

	res = srv.do(t, "GET", "/api/v1/things/bad", token, nil, map[string]string{"X-Request-Id": "client-id-2"})
	assert.Equal(t, "client-id-2", res.header.Get("X-Request-Id"))
	assert.Equal(t, "client-id-2", res.problem.RequestID, "the problem names the request")

	for _, insane := range []string{strings.Repeat("x", 200), "has space", "new\u00e9line"} {
		res = srv.do(t, "GET", "/healthz", "", nil, map[string]string{"X-Request-Id": insane})
		got := res.header.Get("X-Request-Id")
		assert.NotEqual(t, insane, got)
		_, err := uuid.Parse(got)
		assert.NoError(t, err, "a fresh UUID replaces %q", insane)
	}

	res = srv.do(t, "GET", "/healthz", "", nil, nil)
	_, err := uuid.Parse(res.header.Get("X-Request-Id"))
	require.NoError(t, err, "an id is made when none is sent")

	// The access log line carries method, route, status and the request id.
	var found bool
	for line := range strings.SplitSeq(srv.logs.String(), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) != nil || entry["msg"] != "http request" {
			continue
		}
		if entry["request_id"] == "client-id-1" {
			found = true
			assert.Equal(t, "GET", entry["method"])
			assert.Equal(t, "/api/v1/things/:id", entry["route"])
			assert.EqualValues(t, 200, entry["status"])
			assert.Contains(t, entry, "duration")
		}
	}
	assert.True(t, found, "access log line for client-id-1")
}

func TestMetricsCountRequestsByRouteTemplate(t *testing.T) {
	srv := newServer(t)
	for range 3 {
		srv.do(t, "GET", "/api/v1/things/"+uuid.NewString(), token, nil, nil)
	}
	srv.do(t, "GET", "/api/v1/things/"+uuid.NewString(), "", nil, nil)
	srv.do(t, "GET", "/no/such/route", "", nil, nil)

	res := srv.do(t, "GET", "/metrics", "", nil, nil)
	require.Equal(t, http.StatusOK, res.status)
	text := string(res.body)
	assert.Contains(t, text, `http_requests_total{method="GET",route="/api/v1/things/:id",status="200"} 3`)
	assert.Contains(t, text, `http_requests_total{method="GET",route="/api/v1/things/:id",status="401"} 1`)
	assert.Contains(t, text, `http_requests_total{method="GET",route="unmatched",status="404"} 1`)
	assert.Contains(t, text, `http_request_duration_seconds_count{method="GET",route="/api/v1/things/:id",status="200"} 3`)
	assert.NotRegexp(t, regexp.MustCompile(`route="/api/v1/things/[0-9a-f]{8}-`), text, "ids never become labels")
}

func TestReadyz(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	// A dependency that hangs and even ignores its context must not hang /readyz.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hung := func(context.Context) error { <-release; return nil }

	tests := []struct {
		name       string
		checks     map[string]func(context.Context) error
		wantStatus int
		wantChecks map[string]string
	}{
		{"all answer", map[string]func(context.Context) error{"postgres": ok, "rabbitmq": ok}, 200, map[string]string{"postgres": "ok", "rabbitmq": "ok"}},
		{"broker down", map[string]func(context.Context) error{"postgres": ok, "rabbitmq": down}, 503, map[string]string{"postgres": "ok", "rabbitmq": "failed"}},
		{"database hangs", map[string]func(context.Context) error{"postgres": hung, "rabbitmq": ok}, 503, map[string]string{"postgres": "timeout", "rabbitmq": "ok"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(o *httpapi.Options) {
				o.Ready = tc.checks
				o.ReadyTimeout = 2 * time.Second // checks that answer at once must not time out on a loaded machine
			})
			res := srv.do(t, "GET", "/readyz", "", nil, nil)
			require.Equal(t, tc.wantStatus, res.status, string(res.body))
			var body struct {
				Status string            `json:"status"`
				Checks map[string]string `json:"checks"`
			}
			require.NoError(t, json.Unmarshal(res.body, &body))
			assert.Equal(t, tc.wantChecks, body.Checks)
			assert.NotContains(t, string(res.body), "refused", "errors are logged, not shown")
			res = srv.do(t, "GET", "/healthz", "", nil, nil)
			assert.Equal(t, http.StatusOK, res.status, "liveness does not depend on readiness")
		})
	}
}

func TestETagAndPagination(t *testing.T) {
	srv := newServer(t)
	res := srv.do(t, "GET", "/api/v1/things/"+uuid.NewString(), token, nil, nil)
	assert.Equal(t, `"7"`, res.header.Get("ETag"))

	var ids []string
	url := "/api/v1/things?limit=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5, "pagination must end")
		res := srv.do(t, "GET", url, token, nil, nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var list struct {
			Items      []struct{ ID string } `json:"items"`
			NextCursor *string               `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(res.body, &list))
		for _, it := range list.Items {
			ids = append(ids, it.ID)
		}
		if list.NextCursor == nil {
			assert.Contains(t, string(res.body), `"next_cursor":null`)
			break
		}
		url = "/api/v1/things?limit=2&cursor=" + *list.NextCursor
	}
	assert.Equal(t, []string{"1", "2", "3", "4", "5"}, ids)

	// Default limit covers everything; a page past the end is an empty array, not null.
	res = srv.do(t, "GET", "/api/v1/things?cursor="+httpapi.EncodeCursor(struct {
		After int `json:"after"`
	}{After: 5}), token, nil, nil)
	require.Equal(t, http.StatusOK, res.status)
	assert.JSONEq(t, `{"items":[],"next_cursor":null}`, string(res.body))
}

func TestListMarshalsEmptyItemsAsArray(t *testing.T) {
	b, err := json.Marshal(httpapi.List[int]{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"items":[],"next_cursor":null}`, string(b))
	b, err = json.Marshal(httpapi.NewList([]int{1}, "abc"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"items":[1],"next_cursor":"abc"}`, string(b))
}

func TestNewEngineRejectsMissingDependencies(t *testing.T) {
	base := func() httpapi.Options {
		return httpapi.Options{Logger: newServer(t).engineLogger(), Metrics: prometheus.NewRegistry()}
	}
	tests := []struct {
		name   string
		mutate func(*httpapi.Options)
	}{
		{"nil logger", func(o *httpapi.Options) { o.Logger = nil }},
		{"nil metrics", func(o *httpapi.Options) { o.Metrics = nil }},
		{"empty token", func(o *httpapi.Options) { o.Tokens = []string{"a", " "} }},
		{"nil ready check", func(o *httpapi.Options) { o.Ready = map[string]func(context.Context) error{"postgres": nil} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.mutate(&o)
			_, _, err := httpapi.NewEngine(o)
			assert.Error(t, err)
		})
	}
}

func TestTwoEnginesShareOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		_, _, err := httpapi.NewEngine(httpapi.Options{Logger: newServer(t).engineLogger(), Metrics: reg})
		require.NoError(t, err)
	}
}
