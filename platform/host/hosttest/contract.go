package hosttest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Contract checks answers against the OpenAPI document a replica serves, so the document and the
// code cannot drift: every status, header and body a test sees must be documented.
type Contract struct {
	router routers.Router
}

// LoadContract reads and validates the document served at baseURL + "/openapi.json".
func LoadContract(t testing.TB, baseURL string) *Contract {
	t.Helper()
	return ParseContract(t, Fetch(t, baseURL+"/openapi.json"))
}

// Fetch GETs url without credentials and returns the body of its 200 answer.
func Fetch(t testing.TB, url string) []byte {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // a test helper's GET of the server under test
	if err != nil {
		t.Fatalf("hosttest: GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("hosttest: GET %s: %d %v", url, resp.StatusCode, err)
	}
	return raw
}

// ParseContract validates doc and prepares it for checks.
func ParseContract(t testing.TB, doc []byte) *Contract {
	t.Helper()
	loaded, err := openapi3.NewLoader().LoadFromData(doc)
	if err != nil {
		t.Fatalf("hosttest: load OpenAPI document: %v", err)
	}
	if err := loaded.Validate(context.Background()); err != nil {
		t.Fatalf("hosttest: the OpenAPI document does not validate: %v", err)
	}
	loaded.Servers = nil // kin matches no route when a server names a host; paths are what is checked
	router, err := gorillamux.NewRouter(loaded)
	if err != nil {
		t.Fatalf("hosttest: OpenAPI router: %v", err)
	}
	return &Contract{router: router}
}

// Check fails the test when the answer to req is not what the document says that operation answers.
// Requests to no documented operation, 304s and HEAD answers carry nothing to check.
func (c *Contract) Check(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	if status == http.StatusNotModified || req.Method == http.MethodHead {
		return
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	})
	if err != nil {
		t.Errorf("hosttest: %s %s answered %d, which the OpenAPI document does not allow: %v\nbody: %.500s",
			req.Method, req.URL.Path, status, err, body)
	}
}

// contracts caches one Contract per replica URL: the document does not change while it runs.
var contracts sync.Map

func contractOf(t testing.TB, baseURL string) *Contract {
	if c, ok := contracts.Load(baseURL); ok {
		return c.(*Contract)
	}
	c := LoadContract(t, baseURL)
	contracts.Store(baseURL, c)
	return c
}

// Allows returns why the document does not allow req (its route, parameters, headers and body), or
// nil when it does. The body is read and put back, so req can be sent afterwards.
func (c *Contract) Allows(req *http.Request) error {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return err
	}
	var body []byte
	if req.Body != nil {
		if body, err = io.ReadAll(req.Body); err != nil {
			return err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	defer func() { req.Body = io.NopCloser(bytes.NewReader(body)) }()
	return openapi3filter.ValidateRequest(req.Context(), &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	})
}
