package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
)

const token = "s3cret-token"

// staleWrite is the shape of a concurrency conflict as platform/concurrency reports it.
type staleWrite struct{ entity string }

func (e *staleWrite) EntityType() string { return e.entity }
func (e *staleWrite) Table() string      { return strings.ToLower(e.entity) + "s" }
func (e *staleWrite) Key() string        { return "42" }
func (e *staleWrite) Error() string      { return "concurrency conflict: " + e.entity }
func (e *staleWrite) Unwrap() error      { return concurrency.ErrConflict }

// entityError names an entity but is no conflict: it must not become a 409.
type entityError struct{}

func (entityError) EntityType() string { return "Proposal" }
func (entityError) Table() string      { return "proposals" }
func (entityError) Key() string        { return "1" }
func (entityError) Error() string      { return "proposal exploded" }

type thingInput struct {
	Name  string    `json:"name"`
	Count int       `json:"count"`
	Tags  []string  `json:"tags"`
	Owner uuid.UUID `json:"owner"`
}

type thing struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

type thingCursor struct {
	After int `json:"after"`
}

// testRoutes exercise every helper the way a module handler uses them.
func testRoutes(api *gin.RouterGroup) {
	api.POST("/things", httpapi.H(func(c *gin.Context) error {
		var in thingInput
		if err := httpapi.BindJSON(c, &in); err != nil {
			return err
		}
		var v apperr.Validator
		v.Check(in.Name != "", "name", "must not be empty")
		v.Check(in.Count >= 0, "count", "must not be negative")
		if err := v.Err(); err != nil {
			return err
		}
		httpapi.SetETag(c, "1")
		c.JSON(http.StatusCreated, thing{ID: uuid.NewString(), Name: in.Name, Version: "1"})
		return nil
	}))
	api.GET("/things", httpapi.H(func(c *gin.Context) error {
		page, err := httpapi.ParsePage(c)
		if err != nil {
			return err
		}
		var cur thingCursor
		if err := httpapi.DecodeCursor(page.Cursor, &cur); err != nil {
			return err
		}
		if s := c.Query("status"); s != "" && s != "open" {
			return httpapi.InvalidQuery("status", "must be open")
		}
		items := []thing{}
		for i := cur.After + 1; i <= cur.After+page.Limit && i <= 5; i++ {
			items = append(items, thing{ID: fmt.Sprint(i)})
		}
		next := ""
		if cur.After+page.Limit < 5 {
			next = httpapi.EncodeCursor(thingCursor{After: cur.After + page.Limit})
		}
		c.JSON(http.StatusOK, httpapi.NewList(items, next))
		return nil
	}))
	api.GET("/things/:id", httpapi.H(func(c *gin.Context) error {
		id, err := httpapi.PathUUID(c, "id")
		if err != nil {
			return err
		}
		if id == uuid.Nil {
			return apperr.NotFound("Thing", id.String())
		}
		httpapi.SetETag(c, "7")
		c.JSON(http.StatusOK, thing{ID: id.String(), Version: "7"})
		return nil
	}))
	api.PUT("/things/:id", httpapi.H(func(c *gin.Context) error {
		if _, err := httpapi.PathUUID(c, "id"); err != nil {
			return err
		}
		if err := httpapi.Precondition(c).Check("7"); err != nil {
			return err
		}
		httpapi.SetETag(c, "8")
		c.Status(http.StatusNoContent)
		return nil
	}))
	api.POST("/things/:id/accept", httpapi.H(func(c *gin.Context) error {
		var in struct {
			Note string `json:"note"`
		}
		if err := httpapi.BindJSON(c, &in, httpapi.AllowEmpty); err != nil {
			return err
		}
		c.JSON(http.StatusOK, gin.H{"note": in.Note})
		return nil
	}))
	api.POST("/conflicts/:entity", httpapi.H(func(c *gin.Context) error {
		return fmt.Errorf("save: %w", &staleWrite{entity: c.Param("entity")})
	}))
	api.POST("/not-conflicts", httpapi.H(func(*gin.Context) error { return entityError{} }))
	api.GET("/boom", httpapi.H(func(*gin.Context) error {
		return errors.New("dial tcp 10.1.2.3:5432: secret internals")
	}))
	api.GET("/panic", func(*gin.Context) { panic("handler exploded") })
}

type server struct {
	*httptest.Server
	engine *gin.Engine
	logs   *hosttest.LogBuffer
	reg    *prometheus.Registry
}

func newServer(t *testing.T, mutate ...func(*httpapi.Options)) *server {
	t.Helper()
	return newServerWithRoutes(t, nil, mutate...)
}

// newServerWithRoutes mounts extra routes beside testRoutes before serving, as app mounts modules.
func newServerWithRoutes(t *testing.T, extra func(api *gin.RouterGroup), mutate ...func(*httpapi.Options)) *server {
	t.Helper()
	logs := &hosttest.LogBuffer{}
	reg := prometheus.NewRegistry()
	opts := httpapi.Options{
		Logger:        slog.New(slog.NewJSONHandler(logs, nil)),
		Tokens:        []string{"other-token", token},
		Metrics:       reg,
		Ready:         map[string]func(context.Context) error{"postgres": func(context.Context) error { return nil }},
		ConflictCodes: map[string]httpapi.ConflictAnswer{"proposals": {Code: "proposal_already_decided", Detail: "the proposal was already decided"}},
	}
	for _, m := range mutate {
		m(&opts)
	}
	engine, api, err := httpapi.NewEngine(opts)
	require.NoError(t, err)
	testRoutes(api.RouterGroup)
	if extra != nil {
		extra(api.RouterGroup)
	}
	srv := httptest.NewServer(engine)
	t.Cleanup(srv.Close)
	return &server{Server: srv, engine: engine, logs: logs, reg: reg}
}

type response struct {
	status  int
	header  http.Header
	body    []byte
	problem httpapi.Problem
}

func (s *server) do(t *testing.T, method, path, tok string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, body)
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := s.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	r := response{status: res.StatusCode, header: res.Header, body: raw}
	if res.Header.Get("Content-Type") == httpapi.ProblemContentType {
		require.NoError(t, json.Unmarshal(raw, &r.problem), string(raw))
	}
	return r
}

func TestAPI(t *testing.T) {
	srv := newServer(t)
	id := uuid.NewString()
	big := `{"name":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}`

	tests := []struct {
		name        string
		method      string
		url         string
		token       string
		body        string
		contentType string
		header      map[string]string
		wantStatus  int
		wantCode    string
		wantFields  []apperr.FieldError
	}{
		{name: "no token", method: "GET", url: "/api/v1/things/" + id, wantStatus: 401, wantCode: "unauthorized"},
		{name: "wrong token", method: "GET", url: "/api/v1/things/" + id, token: "nope", wantStatus: 401, wantCode: "unauthorized"},
		{name: "token prefix", method: "GET", url: "/api/v1/things/" + id, token: token[:5], wantStatus: 401, wantCode: "unauthorized"},
		{name: "token with suffix", method: "GET", url: "/api/v1/things/" + id, token: token + "x", wantStatus: 401, wantCode: "unauthorized"},
		{name: "basic scheme", method: "GET", url: "/api/v1/things/" + id, header: map[string]string{"Authorization": "Basic " + token}, wantStatus: 401, wantCode: "unauthorized"},
		{name: "right token", method: "GET", url: "/api/v1/things/" + id, token: token, wantStatus: 200},
		{name: "second token", method: "GET", url: "/api/v1/things/" + id, token: "other-token", wantStatus: 200},
		{name: "lower-case scheme", method: "GET", url: "/api/v1/things/" + id, header: map[string]string{"Authorization": "bearer " + token}, wantStatus: 200},
		{name: "unknown api route without token", method: "GET", url: "/api/v1/nothing", wantStatus: 401, wantCode: "unauthorized"},

		{name: "created", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a","count":1}`, contentType: "application/json", wantStatus: 201},
		{name: "json with charset", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a"}`, contentType: "application/json; charset=utf-8", wantStatus: 201},
		{name: "oversize declared", method: "POST", url: "/api/v1/things", token: token, body: big, contentType: "application/json", wantStatus: 413, wantCode: "payload_too_large"},
		{name: "wrong content type", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a"}`, contentType: "text/plain", wantStatus: 415, wantCode: "unsupported_media_type"},
		{name: "no content type", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a"}`, wantStatus: 415, wantCode: "unsupported_media_type"},
		{name: "malformed json", method: "POST", url: "/api/v1/things", token: token, body: `{"name":`, contentType: "application/json", wantStatus: 400, wantCode: "malformed_json"},
		{name: "syntax error", method: "POST", url: "/api/v1/things", token: token, body: `{"name" "a"}`, contentType: "application/json", wantStatus: 400, wantCode: "malformed_json"},
		{name: "trailing garbage", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a"} {}`, contentType: "application/json", wantStatus: 400, wantCode: "malformed_json"},
		{name: "empty body", method: "POST", url: "/api/v1/things", token: token, contentType: "application/json", wantStatus: 400, wantCode: "malformed_json"},
		{name: "unknown field", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a","colour":"red"}`, contentType: "application/json",
			wantStatus: 422, wantCode: "validation_failed", wantFields: []apperr.FieldError{{Field: "colour", Message: "unknown field"}}},
		{name: "wrong json type", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a","count":"many"}`, contentType: "application/json",
			wantStatus: 422, wantCode: "validation_failed", wantFields: []apperr.FieldError{{Field: "count", Message: "must be an integer"}}},
		{name: "number for a uuid", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a","owner":5}`, contentType: "application/json",
			wantStatus: 422, wantCode: "validation_failed", wantFields: []apperr.FieldError{{Field: "owner", Message: "must be a string"}}},
		{name: "number in a string array", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a","tags":["x",1]}`, contentType: "application/json",
			wantStatus: 422, wantCode: "validation_failed", wantFields: []apperr.FieldError{{Field: "tags", Message: "must be a string"}}},
		{name: "malformed uuid", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"a","owner":"nope"}`, contentType: "application/json",
			wantStatus: 422, wantCode: "validation_failed"},
		{name: "not an object", method: "POST", url: "/api/v1/things", token: token, body: `[1]`, contentType: "application/json",
			wantStatus: 422, wantCode: "validation_failed", wantFields: []apperr.FieldError{{Field: "body", Message: "must be an object"}}},
		{name: "validation fields", method: "POST", url: "/api/v1/things", token: token, body: `{"name":"","count":-1}`, contentType: "application/json",
			wantStatus: 422, wantCode: "validation_failed", wantFields: []apperr.FieldError{{Field: "name", Message: "must not be empty"}, {Field: "count", Message: "must not be negative"}}},

		{name: "accept empty body", method: "POST", url: "/api/v1/things/" + id + "/accept", token: token, wantStatus: 200},
		{name: "accept empty json body", method: "POST", url: "/api/v1/things/" + id + "/accept", token: token, contentType: "application/json", wantStatus: 200},
		{name: "accept {}", method: "POST", url: "/api/v1/things/" + id + "/accept", token: token, body: `{}`, contentType: "application/json", wantStatus: 200},
		{name: "accept text body", method: "POST", url: "/api/v1/things/" + id + "/accept", token: token, body: `hello`, contentType: "text/plain", wantStatus: 415, wantCode: "unsupported_media_type"},
		{name: "accept unknown field", method: "POST", url: "/api/v1/things/" + id + "/accept", token: token, body: `{"x":1}`, contentType: "application/json", wantStatus: 422, wantCode: "validation_failed"},

		{name: "bad uuid", method: "GET", url: "/api/v1/things/not-a-uuid", token: token, wantStatus: 404, wantCode: "not_found"},
		{name: "uuid without dashes", method: "GET", url: "/api/v1/things/" + strings.ReplaceAll(id, "-", ""), token: token, wantStatus: 404, wantCode: "not_found"},
		{name: "entity not found", method: "GET", url: "/api/v1/things/" + uuid.Nil.String(), token: token, wantStatus: 404, wantCode: "not_found"},
		{name: "unknown route", method: "GET", url: "/nowhere", wantStatus: 404, wantCode: "not_found"},
		{name: "unknown api route", method: "GET", url: "/api/v1/nothing", token: token, wantStatus: 404, wantCode: "not_found"},
		{name: "unknown method", method: "DELETE", url: "/api/v1/things", token: token, wantStatus: 404, wantCode: "not_found"},
		{name: "trailing slash", method: "GET", url: "/api/v1/things/", token: token, wantStatus: 404, wantCode: "not_found"},

		{name: "if-match current", method: "PUT", url: "/api/v1/things/" + id, token: token, header: map[string]string{"If-Match": `"7"`}, wantStatus: 204},
		{name: "if-match absent", method: "PUT", url: "/api/v1/things/" + id, token: token, wantStatus: 204},
		{name: "if-match star", method: "PUT", url: "/api/v1/things/" + id, token: token, header: map[string]string{"If-Match": `*`}, wantStatus: 204},
		{name: "if-match list", method: "PUT", url: "/api/v1/things/" + id, token: token, header: map[string]string{"If-Match": `"5", "7"`}, wantStatus: 204},
		{name: "if-match stale", method: "PUT", url: "/api/v1/things/" + id, token: token, header: map[string]string{"If-Match": `"6"`}, wantStatus: 412, wantCode: "precondition_failed"},
		{name: "if-match weak", method: "PUT", url: "/api/v1/things/" + id, token: token, header: map[string]string{"If-Match": `W/"7"`}, wantStatus: 412, wantCode: "precondition_failed"},
		{name: "if-match unquoted", method: "PUT", url: "/api/v1/things/" + id, token: token, header: map[string]string{"If-Match": `7`}, wantStatus: 412, wantCode: "precondition_failed"},

		{name: "conflict", method: "POST", url: "/api/v1/conflicts/Delivery", token: token, wantStatus: 409, wantCode: "concurrency_conflict"},
		{name: "conflict with entity code", method: "POST", url: "/api/v1/conflicts/Proposal", token: token, wantStatus: 409, wantCode: "proposal_already_decided"},

		{name: "entity error that is no conflict", method: "POST", url: "/api/v1/not-conflicts", token: token, wantStatus: 500, wantCode: "internal_error"},

		{name: "bad limit", method: "GET", url: "/api/v1/things?limit=0", token: token, wantStatus: 400, wantCode: "invalid_query", wantFields: []apperr.FieldError{{Field: "limit", Message: "must be an integer between 1 and 200"}}},
		{name: "limit too high", method: "GET", url: "/api/v1/things?limit=201", token: token, wantStatus: 400, wantCode: "invalid_query"},
		{name: "limit not a number", method: "GET", url: "/api/v1/things?limit=ten", token: token, wantStatus: 400, wantCode: "invalid_query"},
		{name: "bad cursor", method: "GET", url: "/api/v1/things?cursor=!!!", token: token, wantStatus: 400, wantCode: "invalid_query"},
		{name: "foreign cursor", method: "GET", url: "/api/v1/things?cursor=" + httpapi.EncodeCursor(map[string]string{"id": "x"}), token: token, wantStatus: 400, wantCode: "invalid_query"},
		{name: "bad filter", method: "GET", url: "/api/v1/things?status=nope", token: token, wantStatus: 400, wantCode: "invalid_query"},
		{name: "max limit", method: "GET", url: "/api/v1/things?limit=200", token: token, wantStatus: 200},

		{name: "internal error", method: "GET", url: "/api/v1/boom", token: token, wantStatus: 500, wantCode: "internal_error"},
		{name: "panic", method: "GET", url: "/api/v1/panic", token: token, wantStatus: 500, wantCode: "internal_error"},

		{name: "healthz without token", method: "GET", url: "/healthz", wantStatus: 200},
		{name: "openapi without token", method: "GET", url: "/openapi.json", wantStatus: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			header := map[string]string{}
			for k, v := range tc.header {
				header[k] = v
			}
			if tc.contentType != "" {
				header["Content-Type"] = tc.contentType
			}
			res := srv.do(t, tc.method, tc.url, tc.token, body, header)
			require.Equal(t, tc.wantStatus, res.status, string(res.body))
			if tc.wantCode == "" {
				return
			}
			assert.Equal(t, httpapi.ProblemContentType, res.header.Get("Content-Type"))
			p := res.problem
			assert.Equal(t, tc.wantCode, p.Code)
			assert.Equal(t, tc.wantStatus, p.Status)
			assert.Equal(t, "urn:keelson:problem:"+tc.wantCode, p.Type)
			assert.Equal(t, http.StatusText(tc.wantStatus), p.Title)
			assert.NotEmpty(t, p.Detail)
			assert.Equal(t, res.header.Get("X-Request-Id"), p.RequestID)
			if tc.wantFields != nil {
				assert.Equal(t, tc.wantFields, p.Errors)
			}
			if tc.wantStatus == 401 {
				assert.Equal(t, "Bearer", res.header.Get("WWW-Authenticate"))
			}
			if tc.wantStatus == 500 {
				assert.Equal(t, "internal error", p.Detail)
				assert.NotContains(t, string(res.body), "secret internals")
				assert.NotContains(t, string(res.body), "exploded")
			}
		})
	}
}

func (s *server) engineLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(s.logs, nil)) }
