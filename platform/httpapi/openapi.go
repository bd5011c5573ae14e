package httpapi

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"
)

// openAPIBase holds info, servers, bearer security, the operations routes and the shared
// components (Problem, FieldError, Limit/Cursor/IfMatch parameters, error responses).
//
//go:embed openapi_base.json
var openAPIBase []byte

// operationMethods are the keys of an OpenAPI path item that are operations.
var operationMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// OpenAPIDocument merges the "paths" and "components" of module fragments into the base document.
// Fragment paths are full paths ("/api/v1/conversations/{id}"). Defining one operation or one
// component twice with different content is an error.
func OpenAPIDocument(fragments ...[]byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openAPIBase, &doc); err != nil {
		return nil, fmt.Errorf("httpapi: base OpenAPI document: %w", err)
	}
	paths := doc["paths"].(map[string]any)
	components := doc["components"].(map[string]any)
	for i, raw := range fragments {
		var frag struct {
			Paths      map[string]map[string]any `json:"paths"`
			Components map[string]map[string]any `json:"components"`
			Webhooks   map[string]map[string]any `json:"webhooks"`
		}
		if err := json.Unmarshal(raw, &frag); err != nil {
			return nil, fmt.Errorf("httpapi: OpenAPI fragment %d: %w", i, err)
		}
		for path, item := range frag.Paths {
			if err := mergeInto(paths, path, item); err != nil {
				return nil, fmt.Errorf("httpapi: OpenAPI fragment %d: path %s: %w", i, path, err)
			}
		}
		if len(frag.Webhooks) > 0 {
			if doc["webhooks"] == nil {
				doc["webhooks"] = map[string]any{}
			}
			for name, item := range frag.Webhooks {
				if err := mergeInto(doc["webhooks"].(map[string]any), name, item); err != nil {
					return nil, fmt.Errorf("httpapi: OpenAPI fragment %d: webhook %s: %w", i, name, err)
				}
			}
		}
		for section, entries := range frag.Components {
			if err := mergeInto(components, section, entries); err != nil {
				return nil, fmt.Errorf("httpapi: OpenAPI fragment %d: components.%s: %w", i, section, err)
			}
		}
	}
	withRequestID(doc)
	if missing := unresolvedRefs(doc); len(missing) > 0 {
		return nil, fmt.Errorf("httpapi: OpenAPI $ref without a target: %s", strings.Join(missing, ", "))
	}
	return json.MarshalIndent(doc, "", "  ")
}

// withRequestID documents the X-Request-Id header every answer carries.
func withRequestID(doc map[string]any) {
	add := func(resp any) {
		r, ok := resp.(map[string]any)
		if !ok || r["$ref"] != nil {
			return
		}
		headers, _ := r["headers"].(map[string]any)
		if headers == nil {
			headers = map[string]any{}
			r["headers"] = headers
		}
		headers["X-Request-Id"] = map[string]any{"$ref": "#/components/headers/X-Request-Id"}
	}
	for _, item := range doc["paths"].(map[string]any) {
		for _, m := range operationMethods {
			op, _ := item.(map[string]any)[m].(map[string]any)
			responses, _ := op["responses"].(map[string]any)
			for _, resp := range responses {
				add(resp)
			}
		}
	}
	components, _ := doc["components"].(map[string]any)
	responses, _ := components["responses"].(map[string]any)
	for _, resp := range responses {
		add(resp)
	}
}

// unresolvedRefs lists the local "$ref"s of doc that point at nothing, so a typo fails at start.
func unresolvedRefs(doc map[string]any) []string {
	seen := map[string]bool{}
	var missing []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				ref, ok := child.(string)
				if k == "$ref" && ok && strings.HasPrefix(ref, "#/") && !seen[ref] {
					seen[ref] = true
					if !resolves(doc, ref) {
						missing = append(missing, ref)
					}
					continue
				}
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(doc)
	sort.Strings(missing)
	return missing
}

// resolves follows a local JSON pointer ("#/components/schemas/X").
func resolves(doc map[string]any, ref string) bool {
	var cur any = doc
	for _, token := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[token]; !ok {
			return false
		}
	}
	return true
}

// mergeInto adds entries under parent[key]; an entry already there must be identical.
func mergeInto(parent map[string]any, key string, entries map[string]any) error {
	existing, _ := parent[key].(map[string]any)
	if existing == nil {
		existing = map[string]any{}
		parent[key] = existing
	}
	for name, v := range entries {
		if old, ok := existing[name]; ok && !reflect.DeepEqual(old, v) {
			return fmt.Errorf("%q defined twice with different content", name)
		}
		existing[name] = v
	}
	return nil
}

// CheckOpenAPI compares the routes of engine with the operations of doc and returns an error
// naming every route the document lacks and every documented operation no route serves.
func CheckOpenAPI(engine *gin.Engine, doc []byte) error {
	var parsed struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &parsed); err != nil {
		return fmt.Errorf("httpapi: OpenAPI document: %w", err)
	}
	documented := map[string]bool{}
	for path, item := range parsed.Paths {
		for _, m := range operationMethods {
			if _, ok := item[m]; ok {
				documented[strings.ToUpper(m)+" "+path] = true
			}
		}
	}
	routed := map[string]bool{}
	for _, r := range engine.Routes() {
		routed[r.Method+" "+openAPIPath(r.Path)] = true
	}
	var problems []string
	for op := range routed {
		if !documented[op] {
			problems = append(problems, "route not in the OpenAPI document: "+op)
		}
	}
	for op := range documented {
		if !routed[op] {
			problems = append(problems, "documented operation without a route: "+op)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return errors.New(strings.Join(problems, "\n"))
}

// openAPIPath turns gin's "/a/:id/*rest" into OpenAPI's "/a/{id}/{rest}".
func openAPIPath(ginPath string) string {
	segments := strings.Split(ginPath, "/")
	for i, s := range segments {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			segments[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segments, "/")
}

// withoutPath removes one path from a document.
func withoutPath(doc []byte, path string) ([]byte, error) {
	var parsed map[string]any
	if err := json.Unmarshal(doc, &parsed); err != nil {
		return nil, err
	}
	if paths, ok := parsed["paths"].(map[string]any); ok {
		delete(paths, path)
	}
	return json.MarshalIndent(parsed, "", "  ")
}
