package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/correlation"
	"github.com/keelson/keelson/platform/httpapi"
)

// api calls the replica's own JSON API in-process with the signed-in user's token, so the console
// shows and does exactly what that token may do: authentication, scopes and tenants are enforced
// once, by the API.
type api struct {
	engine   *gin.Engine
	declared *httpapi.API // the routes the modules declared, with their operation ids and scopes

	routesOnce sync.Once
	routes     map[string]httpapi.Route // by operation id
}

// call is one request to the API, naming the route by the operation id its module declared.
type call struct {
	op      string   // e.g. webhooks.OpListDeliveries
	params  []string // the route's path parameters, in order
	query   url.Values
	body    any
	ifMatch string // a version; sent as a strong ETag
	// idempotencyKey is the form's own key, so a form sent twice (a double click, a retried
	// request) has one effect where the API honours Idempotency-Key.
	idempotencyKey string
}

// apiError is an API answer of 400 or more, with its problem+json body.
type apiError struct {
	Status int
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

func (e *apiError) Error() string {
	if e.Detail != "" {
		return e.Detail
	}
	return fmt.Sprintf("the API answered %d %s", e.Status, http.StatusText(e.Status))
}

// statusOf returns the API status of err, or 0 when err is not an API answer.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// route is the declared route of operation id op.
func (a *api) route(op string) (httpapi.Route, bool) {
	a.routesOnce.Do(func() {
		a.routes = map[string]httpapi.Route{}
		for _, rt := range a.declared.Routes() {
			a.routes[rt.ID] = rt
		}
	})
	rt, ok := a.routes[op]
	return rt, ok
}

// target fills the route's path parameters, each kept inside its own segment.
func target(path string, params []string) (string, error) {
	var b strings.Builder
	for {
		open := strings.IndexByte(path, '{')
		if open < 0 {
			b.WriteString(path)
			break
		}
		end := strings.IndexByte(path[open:], '}')
		if end < 0 || len(params) == 0 {
			return "", fmt.Errorf("console: route %s needs more parameters", path)
		}
		b.WriteString(path[:open])
		b.WriteString(escapePath(params[0]))
		params, path = params[1:], path[open+end+1:]
	}
	if len(params) > 0 {
		return "", fmt.Errorf("console: too many parameters for %s", path)
	}
	return b.String(), nil
}

// do runs c for the request r of the console and decodes a 2xx JSON answer into out (nil = ignore it).
func (a *api) do(r *http.Request, token string, c call, out any) error {
	rt, ok := a.route(c.op)
	if !ok {
		return &apiError{Status: http.StatusNotFound, Detail: "this replica's API has no " + c.op}
	}
	path, err := target(rt.Path, c.params)
	if err != nil {
		return err
	}
	var body io.Reader
	if c.body != nil {
		raw, err := json.Marshal(c.body)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	if len(c.query) > 0 {
		path += "?" + c.query.Encode()
	}
	req, err := http.NewRequestWithContext(r.Context(), rt.Method, path, body)
	if err != nil {
		return err
	}
	req.RemoteAddr = r.RemoteAddr
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if id := correlation.ID(r.Context()); id != "" {
		req.Header.Set(httpapi.RequestIDHeader, id)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.ifMatch != "" {
		req.Header.Set("If-Match", `"`+c.ifMatch+`"`)
	}
	if c.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", c.idempotencyKey)
	}
	rec := &recorder{header: http.Header{}}
	a.engine.ServeHTTP(rec, req)
	if rec.status >= 400 {
		ae := &apiError{}
		_ = json.Unmarshal(rec.body.Bytes(), ae)
		ae.Status = rec.status
		return ae
	}
	if out == nil || rec.body.Len() == 0 {
		return nil
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("console: decode %s: %w", c.op, err)
	}
	return nil
}

var saneFormKey = regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)

// listPage fetches one page of the API list at path, from the ?cursor the console page was given;
// next is the console address of the page after it (the console page at, with that page's cursor),
// "" on the last.
func listPage[T any](a *api, g *gin.Context, token string, c call, limit int, at string) (items []T, next string, err error) {
	c.query = url.Values{"limit": {itoa(limit)}}
	if cur := g.Query("cursor"); cur != "" {
		c.query.Set("cursor", cur)
	}
	var l list[T]
	if err := a.do(g.Request, token, c, &l); err != nil {
		return nil, "", err
	}
	if l.NextCursor != nil {
		next = Prefix + at + "?" + url.Values{"cursor": {*l.NextCursor}}.Encode()
	}
	return l.Items, next, nil
}

// formKey reads the idempotency key a form was rendered with; anything else is ignored.
func formKey(g *gin.Context) string {
	if k := g.PostForm("form_key"); saneFormKey.MatchString(k) {
		return k
	}
	return ""
}

// may reports whether the API has the route of operation op and the session's token has the scope it
// declares, so the console offers an action only where it can work.
func (a *api) may(s *session, op string) bool {
	rt, ok := a.route(op)
	return ok && s.allows(rt.Scope)
}

// recorder keeps an in-process answer of the API.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// escapePath keeps a value from the page inside its own path segment.
func escapePath(s string) string { return url.PathEscape(strings.TrimSpace(s)) }

// list is a page of any of the API's lists.
type list[T any] = httpapi.List[T]
