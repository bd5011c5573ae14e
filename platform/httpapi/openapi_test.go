package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/httpapi"
)

// thingsFragment documents testRoutes the way a module documents its own.
func thingsFragment(t *testing.T, drop string, extra map[string]any) []byte {
	op := func(summary string) map[string]any {
		return map[string]any{"summary": summary, "responses": map[string]any{"200": map[string]any{"description": "ok"}}}
	}
	paths := map[string]any{
		"/api/v1/things":             map[string]any{"get": op("list"), "post": op("create")},
		"/api/v1/things/{id}":        map[string]any{"get": op("get"), "put": op("replace")},
		"/api/v1/things/{id}/accept": map[string]any{"post": op("accept")},
		"/api/v1/conflicts/{entity}": map[string]any{"post": op("conflict")},
		"/api/v1/not-conflicts":      map[string]any{"post": op("not a conflict")},
		"/api/v1/boom":               map[string]any{"get": op("boom")},
		"/api/v1/panic":              map[string]any{"get": op("panic")},
	}
	delete(paths, drop)
	for k, v := range extra {
		paths[k] = v
	}
	b, err := json.Marshal(map[string]any{
		"paths":      paths,
		"components": map[string]any{"schemas": map[string]any{"Thing": map[string]any{"type": "object"}}},
	})
	require.NoError(t, err)
	return b
}

func TestOpenAPIDocumentServesTheBaseAndMergesFragments(t *testing.T) {
	srv := newServer(t)
	res := srv.do(t, "GET", "/openapi.json", "", nil, nil)
	require.Equal(t, http.StatusOK, res.status)

	var doc struct {
		OpenAPI    string                    `json:"openapi"`
		Paths      map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas         map[string]any `json:"schemas"`
			SecuritySchemes map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(res.body, &doc))
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	assert.Contains(t, doc.Paths, "/healthz")
	assert.Contains(t, doc.Components.Schemas, "Problem")
	assert.Contains(t, doc.Components.SecuritySchemes, "bearerAuth")

	merged, err := httpapi.OpenAPIDocument(thingsFragment(t, "", nil))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(merged, &doc))
	assert.Contains(t, doc.Paths, "/api/v1/things/{id}")
	assert.Contains(t, doc.Components.Schemas, "Thing")
	require.NoError(t, httpapi.CheckOpenAPI(srv.engine, merged), "the merged document matches the routes")
}

func TestCheckOpenAPICatchesDrift(t *testing.T) {
	srv := newServer(t)

	doc, err := httpapi.OpenAPIDocument(thingsFragment(t, "/api/v1/things/{id}", nil))
	require.NoError(t, err)
	err = httpapi.CheckOpenAPI(srv.engine, doc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "route not in the OpenAPI document: GET /api/v1/things/{id}")
	assert.Contains(t, err.Error(), "route not in the OpenAPI document: PUT /api/v1/things/{id}")

	ghost := map[string]any{"/api/v1/ghosts/{id}": map[string]any{"delete": map[string]any{"responses": map[string]any{}}}}
	doc, err = httpapi.OpenAPIDocument(thingsFragment(t, "", ghost))
	require.NoError(t, err)
	err = httpapi.CheckOpenAPI(srv.engine, doc)
	require.Error(t, err)
	assert.Equal(t, "documented operation without a route: DELETE /api/v1/ghosts/{id}", err.Error())
}

func TestOpenAPIDocumentRejectsClashingFragments(t *testing.T) {
	a := []byte(`{"paths":{"/api/v1/x":{"get":{"summary":"a"}}},"components":{"schemas":{"X":{"type":"object"}}}}`)
	sameSchema := []byte(`{"components":{"schemas":{"X":{"type":"object"}}}}`)
	otherSchema := []byte(`{"components":{"schemas":{"X":{"type":"string"}}}}`)
	sameOp := []byte(`{"paths":{"/api/v1/x":{"get":{"summary":"b"}}}}`)
	otherOp := []byte(`{"paths":{"/api/v1/x":{"post":{"summary":"b"}}}}`)
	problem := []byte(`{"components":{"schemas":{"Problem":{"type":"string"}}}}`)

	_, err := httpapi.OpenAPIDocument(a, sameSchema, otherOp)
	require.NoError(t, err, "identical components and new methods on a path merge")
	_, err = httpapi.OpenAPIDocument(a, otherSchema)
	assert.ErrorContains(t, err, `"X" defined twice`)
	_, err = httpapi.OpenAPIDocument(a, sameOp)
	assert.ErrorContains(t, err, `"get" defined twice`)
	_, err = httpapi.OpenAPIDocument(problem)
	assert.ErrorContains(t, err, `"Problem" defined twice`, "modules cannot redefine the shared Problem")
}

func TestOpenAPIDocumentRejectsDanglingRefs(t *testing.T) {
	ok := []byte(`{"paths":{"/api/v1/x":{"get":{"responses":{"404":{"$ref":"#/components/responses/NotFound"},
		"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/X"}}}}}}}},
		"components":{"schemas":{"X":{"type":"object"}}}}`)
	_, err := httpapi.OpenAPIDocument(ok)
	require.NoError(t, err, "refs to the fragment's own and the shared components resolve")

	dangling := []byte(`{"paths":{"/api/v1/x":{"get":{"responses":{"200":{"description":"ok",
		"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Typo"}}}}}}}}}`)
	_, err = httpapi.OpenAPIDocument(dangling)
	assert.ErrorContains(t, err, "#/components/schemas/Typo")
}
