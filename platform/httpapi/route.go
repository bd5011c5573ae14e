package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/concurrency"
)

// Route declares one operation. Its gin handler and its OpenAPI operation are both made from it and
// from the handler's input and output types, so the served document describes what the code does.
//
// Input fields: `path:"id"` (uuid.UUID: anything else is 404; string), `query:"name"` (string, uuid.UUID:
// 400 when malformed; `enum:"a,b"` refuses other values with 400), a Page field (?limit and ?cursor),
// a concurrency.Precondition field (If-Match), and Body (JSON, decoded by BindJSON; `required:"false"`
// lets it be empty). Output fields: `header:"ETag"` (a version: quoted, and a GET whose If-None-Match
// lists it answers 304), `header:"Location"`, Body, and Status (int: one of Route.OtherStatuses, 0 = Route.Status).
type Route struct {
	Method  string
	Path    string // under the group, OpenAPI style: "/subscriptions/{id}"
	ID      string // operationId
	Summary string
	Status  int // success status; 0 = 200
	// OtherStatuses are further success statuses with the same body, chosen by the output's Status field.
	OtherStatuses []int
	Errors        []int      // problem statuses beyond those the input implies (401, 500 always; 404 for path ids; 400 for queries; 400, 413, 415, 422 for bodies; 409, 412 for If-Match)
	Scope         auth.Scope // token scope the route requires (403 insufficient_scope without it), shown in the document; "" = any valid token
	Tags          []string   // default: the group's tag
}

// API is the authenticated /api/v1 group plus the routes declared on it.
type API struct {
	*gin.RouterGroup
	mu     sync.Mutex
	routes []declaredRoute
	// groupScopes are the read and write scopes of each module prefix; they also guard the routes a
	// module declares the gin way under its prefix, which Handle does not see.
	groupScopes []groupScope
	declared    map[string]bool // "GET /api/v1/x/:id" of every Handle route
}

type groupScope struct {
	prefix      string // "/api/v1/webhooks"
	read, write auth.Scope
}

func (s groupScope) forMethod(method string) auth.Scope {
	if method == http.MethodGet || method == http.MethodHead {
		return s.read
	}
	return s.write
}

type declaredRoute struct {
	Route
	fullPath string
	in, out  reflect.Type
}

// Group is a module's part of the API: a path prefix and the tag of its operations.
type Group struct {
	api    *API
	gin    *gin.RouterGroup
	prefix string
	tag    string
	scopes *groupScope
}

// Module returns the group of routes under prefix ("/webhooks"), tagged tag in the document.
func (a *API) Module(prefix, tag string) *Group {
	return &Group{api: a, gin: a.Group(prefix), prefix: prefix, tag: tag}
}

// Scopes makes read the scope of the group's GET routes and write that of the others, unless a
// Route names its own; routes declared the gin way under the prefix get them too.
func (g *Group) Scopes(read, write auth.Scope) *Group {
	gs := groupScope{prefix: APIPrefix + g.prefix, read: read, write: write}
	g.scopes = &gs
	g.api.mu.Lock()
	g.api.groupScopes = append(g.api.groupScopes, gs)
	g.api.mu.Unlock()
	return g
}

// undeclaredScopes checks the group scope of routes that Handle did not declare (it checks its own).
func (a *API) undeclaredScopes() gin.HandlerFunc {
	return func(c *gin.Context) {
		full := c.FullPath()
		a.mu.Lock()
		declared := a.declared[c.Request.Method+" "+full]
		scope := a.scopeOfPath(c.Request.Method, full)
		a.mu.Unlock()
		if !declared && scope != "" {
			if err := requireScope(c, scope); err != nil {
				writeError(c, err)
				return
			}
		}
		c.Next()
	}
}

// scopeOfPath is the group scope of a path (gin or OpenAPI style) under a group's prefix; a.mu held.
func (a *API) scopeOfPath(method, path string) auth.Scope {
	for _, gs := range a.groupScopes {
		if path == gs.prefix || strings.HasPrefix(path, gs.prefix+"/") {
			return gs.forMethod(method)
		}
	}
	return ""
}

// routeParams matches a path parameter in gin (":id", "*rest") or OpenAPI ("{id}") style.
var routeParams = regexp.MustCompile(`/(?:[:*][^/]*|\{[^/]*\})`)

// RoutePattern is path with each parameter, in gin or OpenAPI style, reduced to a bare ":", so the
// same route compares equal however it was written.
func RoutePattern(path string) string { return routeParams.ReplaceAllString(path, "/:") }

// ScopeOf is the token scope a request of method on path needs ("" = any valid token): the declared
// route's own, else the group's. path is the full path, its parameters in gin or OpenAPI style or a bare ":".
func (a *API) ScopeOf(method, path string) auth.Scope {
	want := RoutePattern(path)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.routes {
		if r.Method == method && RoutePattern(r.fullPath) == want {
			return r.Scope
		}
	}
	return a.scopeOfPath(method, want)
}

// Routes returns the declared routes (full path, method, operation id), for checks and listings.
func (a *API) Routes() []Route {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Route, len(a.routes))
	for i, r := range a.routes {
		out[i] = r.Route
		out[i].Path = r.fullPath
	}
	return out
}

var (
	pageType         = reflect.TypeFor[Page]()
	preconditionType = reflect.TypeFor[concurrency.Precondition]()
	uuidType         = reflect.TypeFor[uuid.UUID]()
)

// Handle declares rt on g with handler h; the input is bound from the request as In's tags say and
// the output written as Out's say. A wrong tag is a programming error and panics at start.
func Handle[In, Out any](g *Group, rt Route, h func(ctx context.Context, in *In) (*Out, error)) {
	in, out := reflect.TypeFor[In](), reflect.TypeFor[Out]()
	binders := inputBinders(in)
	writeOut := outputWriter(rt, out)
	if rt.Status == 0 {
		rt.Status = http.StatusOK
	}
	if len(rt.Tags) == 0 && g.tag != "" {
		rt.Tags = []string{g.tag}
	}
	if rt.Scope == "" && g.scopes != nil {
		rt.Scope = g.scopes.forMethod(rt.Method)
	}
	full := APIPrefix + g.prefix + rt.Path
	g.api.mu.Lock()
	g.api.routes = append(g.api.routes, declaredRoute{Route: rt, fullPath: full, in: in, out: out})
	if g.api.declared == nil {
		g.api.declared = map[string]bool{}
	}
	g.api.declared[rt.Method+" "+APIPrefix+g.prefix+ginPath(rt.Path)] = true
	g.api.mu.Unlock()
	g.gin.Handle(rt.Method, ginPath(rt.Path), H(func(c *gin.Context) error {
		// Before any input is read: a token without the scope learns nothing about ids or bodies.
		if err := requireScope(c, rt.Scope); err != nil {
			return err
		}
		input := new(In)
		v := reflect.ValueOf(input).Elem()
		for _, bind := range binders {
			if err := bind(c, v); err != nil {
				return err
			}
		}
		output, err := h(c.Request.Context(), input)
		if err != nil {
			return err
		}
		writeOut(c, output)
		return nil
	}))
}

// ginPath turns "/x/{id}" into gin's "/x/:id".
func ginPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			parts[i] = ":" + s[1:len(s)-1]
		}
	}
	return strings.Join(parts, "/")
}

type binder func(c *gin.Context, v reflect.Value) error

func inputBinders(t reflect.Type) []binder {
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("httpapi: input %s is not a struct", t))
	}
	var out []binder
	for i := range t.NumField() {
		f, idx := t.Field(i), i
		switch {
		case f.Tag.Get("path") != "":
			name := f.Tag.Get("path")
			switch f.Type {
			case uuidType:
				out = append(out, func(c *gin.Context, v reflect.Value) error {
					id, err := PathUUID(c, name)
					v.Field(idx).Set(reflect.ValueOf(id))
					return err
				})
			default:
				mustKind(f, reflect.String)
				out = append(out, func(c *gin.Context, v reflect.Value) error {
					v.Field(idx).SetString(c.Param(name))
					return nil
				})
			}
		case f.Tag.Get("query") != "":
			name := f.Tag.Get("query")
			enum := enumOf(f)
			switch f.Type {
			case uuidType:
				out = append(out, func(c *gin.Context, v reflect.Value) error {
					id, err := QueryUUID(c, name)
					v.Field(idx).Set(reflect.ValueOf(id))
					return err
				})
			default:
				mustKind(f, reflect.String)
				out = append(out, func(c *gin.Context, v reflect.Value) error {
					raw := c.Query(name)
					if raw != "" && enum != nil && !slices.Contains(enum, raw) {
						return InvalidQuery(name, "must be one of "+strings.Join(enum, ", "))
					}
					v.Field(idx).SetString(raw)
					return nil
				})
			}
		case f.Type == pageType:
			out = append(out, func(c *gin.Context, v reflect.Value) error {
				p, err := ParsePage(c)
				v.Field(idx).Set(reflect.ValueOf(p))
				return err
			})
		case f.Type == preconditionType:
			out = append(out, func(c *gin.Context, v reflect.Value) error {
				v.Field(idx).Set(reflect.ValueOf(Precondition(c)))
				return nil
			})
		case f.Name == "Body":
			var opts []BindOption
			if f.Tag.Get("required") == "false" {
				opts = append(opts, AllowEmpty)
			}
			out = append(out, func(c *gin.Context, v reflect.Value) error {
				return BindJSON(c, v.Field(idx).Addr().Interface(), opts...)
			})
		default:
			panic(fmt.Sprintf("httpapi: input field %s.%s has no path, query or Body role", t, f.Name))
		}
	}
	return out
}

func mustKind(f reflect.StructField, k reflect.Kind) {
	if f.Type.Kind() != k {
		panic(fmt.Sprintf("httpapi: input field %s must be a %s", f.Name, k))
	}
}

func enumOf(f reflect.StructField) []string {
	if e := f.Tag.Get("enum"); e != "" {
		return strings.Split(e, ",")
	}
	return nil
}

// outputWriter writes the headers and body of Out; a GET whose If-None-Match lists the ETag gets 304.
func outputWriter(rt Route, t reflect.Type) func(c *gin.Context, out any) {
	etag, location, body, statusField := -1, -1, -1, -1
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.Name == "Status" && f.Type.Kind() == reflect.Int:
			statusField = i
		case f.Tag.Get("header") == "ETag":
			etag = i
		case f.Tag.Get("header") == "Location":
			location = i
		case f.Name == "Body":
			body = i
		default:
			panic(fmt.Sprintf("httpapi: output field %s.%s has no header or Body role", t, f.Name))
		}
	}
	status := rt.Status
	if status == 0 {
		status = http.StatusOK
	}
	var secretFields []string
	if body >= 0 {
		secretFields = secretFieldsOf(t.Field(body).Type)
	}
	return func(c *gin.Context, out any) {
		v := reflect.ValueOf(out).Elem()
		status := status
		if statusField >= 0 && v.Field(statusField).Int() != 0 {
			status = int(v.Field(statusField).Int())
		}
		if etag >= 0 {
			version := v.Field(etag).String()
			if rt.Method == http.MethodGet && NotModified(c, version) {
				return
			}
			SetETag(c, version)
		}
		if location >= 0 {
			c.Header("Location", v.Field(location).String())
		}
		if body < 0 || status == http.StatusNoContent {
			c.Status(status)
			return
		}
		if secretFields != nil {
			c.Set(secretFieldsKey, secretFields)
		}
		c.JSON(status, v.Field(body).Interface())
	}
}

// secretFieldsOf names the JSON fields of a body struct tagged `secret:"true"`: values shown once
// (a signing secret, a token) that no stored copy of the answer may keep.
func secretFieldsOf(t reflect.Type) []string {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("secret") != "true" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			panic(fmt.Sprintf("httpapi: secret field %s.%s needs a JSON name", t, f.Name))
		}
		out = append(out, name)
	}
	return out
}
