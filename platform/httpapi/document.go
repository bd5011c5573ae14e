package httpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// EventDoc is a public event as the document's "webhooks" section shows it.
type EventDoc struct {
	Type        string
	Description string
	Payload     reflect.Type
	Example     any
}

// problemResponses are the shared error responses of the base document, by status.
var problemResponses = map[int]string{
	http.StatusBadRequest: "BadRequest", http.StatusUnauthorized: "Unauthorized", http.StatusNotFound: "NotFound",
	http.StatusConflict: "Conflict", http.StatusPreconditionFailed: "PreconditionFailed",
	http.StatusRequestEntityTooLarge: "PayloadTooLarge", http.StatusUnsupportedMediaType: "UnsupportedMediaType",
	http.StatusUnprocessableEntity: "ValidationFailed", http.StatusInternalServerError: "InternalError",
}

// Document is the served OpenAPI document: the base (operations routes, shared components), every
// declared route and every public event.
func (a *API) Document(events []EventDoc) ([]byte, error) {
	frag, err := a.fragment(events)
	if err != nil {
		return nil, err
	}
	return OpenAPIDocument(frag)
}

func (a *API) fragment(events []EventDoc) ([]byte, error) {
	a.mu.Lock()
	routes := slices.Clone(a.routes)
	a.mu.Unlock()
	reg := huma.NewMapRegistry("#/components/schemas/", huma.DefaultSchemaNamer)
	paths := map[string]map[string]any{}
	for _, r := range routes {
		if paths[r.fullPath] == nil {
			paths[r.fullPath] = map[string]any{}
		}
		paths[r.fullPath][strings.ToLower(r.Method)] = operation(reg, r)
	}
	hooks := map[string]any{}
	for _, e := range events {
		hooks[e.Type] = map[string]any{"post": eventOperation(reg, e)}
	}
	// Client generators keep only the components that paths reach (oapi-codegen prunes by paths, not
	// webhooks): an event's payload is written out in place, so every generated type is defined.
	schemas, err := roundTrip(reg.Map())
	if err != nil {
		return nil, err
	}
	inlined, err := roundTrip(hooks)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
		"webhooks":   inlineRefs(inlined, schemas, 0),
	})
}

// roundTrip turns v into plain JSON values (maps, slices), as the document is merged.
func roundTrip(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(raw, &out)
}

// inlineRefs replaces each "#/components/schemas/X" reference in v by a copy of schema X; depth
// bounds a schema that contains itself, which then keeps its reference.
func inlineRefs(v any, schemas map[string]any, depth int) map[string]any {
	out, _ := inlineValue(v, schemas, depth).(map[string]any)
	return out
}

func inlineValue(v any, schemas map[string]any, depth int) any {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok && len(v) == 1 && depth < 8 {
			if target, ok := schemas[strings.TrimPrefix(ref, "#/components/schemas/")]; ok && strings.HasPrefix(ref, "#/components/schemas/") {
				return inlineValue(target, schemas, depth+1)
			}
		}
		out := make(map[string]any, len(v))
		for k, child := range v {
			out[k] = inlineValue(child, schemas, depth)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, child := range v {
			out[i] = inlineValue(child, schemas, depth)
		}
		return out
	default:
		return v
	}
}

func operation(reg huma.Registry, r declaredRoute) map[string]any {
	// Every API route may meet a missing token, a disabled tenant, the token's rate limit, an outage of the database, or a fault.
	problems := map[int]bool{http.StatusUnauthorized: true, http.StatusForbidden: true, http.StatusTooManyRequests: true,
		http.StatusInternalServerError: true, http.StatusServiceUnavailable: true}
	for _, s := range r.Errors {
		problems[s] = true
	}
	var params []any
	var body map[string]any
	for i := range r.in.NumField() {
		f := r.in.Field(i)
		switch {
		case f.Tag.Get("path") != "":
			params = append(params, parameter(f.Tag.Get("path"), "path", f, true))
			problems[http.StatusNotFound] = true
		case f.Tag.Get("query") != "":
			params = append(params, parameter(f.Tag.Get("query"), "query", f, false))
			problems[http.StatusBadRequest] = true
		case f.Type == pageType:
			params = append(params, ref("parameters/Limit"), ref("parameters/Cursor"))
			problems[http.StatusBadRequest] = true
		case f.Type == preconditionType:
			params = append(params, ref("parameters/IfMatch"))
			problems[http.StatusPreconditionFailed], problems[http.StatusConflict] = true, true
		case f.Name == "Body":
			body = map[string]any{
				"required": f.Tag.Get("required") != "false",
				"content":  map[string]any{"application/json": map[string]any{"schema": reg.Schema(f.Type, true, r.ID+"Request")}},
			}
			for _, s := range []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity} {
				problems[s] = true
			}
		}
	}
	if r.Method == http.MethodPost {
		params = append(params, map[string]any{"name": IdempotencyKeyHeader, "in": "header", "schema": map[string]any{"type": "string"},
			"description": "Makes the POST safe to retry: the same key answers the stored response (24 h); another body with it 422, one still running 409."})
		for _, s := range []int{http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity} {
			problems[s] = true
		}
	}
	success := map[string]any{"description": http.StatusText(r.Status)}
	headers := map[string]any{}
	etag := false
	for i := range r.out.NumField() {
		f := r.out.Field(i)
		switch {
		case f.Tag.Get("header") != "":
			headers[f.Tag.Get("header")] = ref("headers/" + f.Tag.Get("header"))
			etag = etag || f.Tag.Get("header") == "ETag"
		case f.Name == "Body" && r.Status != http.StatusNoContent:
			success["content"] = map[string]any{"application/json": map[string]any{"schema": reg.Schema(f.Type, true, r.ID+"Response")}}
		}
	}
	if len(headers) > 0 {
		success["headers"] = headers
	}
	responses := map[string]any{strconv.Itoa(r.Status): success}
	for _, other := range r.OtherStatuses {
		alt := maps.Clone(success)
		alt["description"] = http.StatusText(other)
		responses[strconv.Itoa(other)] = alt
	}
	if etag && r.Method == http.MethodGet {
		params = append(params, map[string]any{"name": "If-None-Match", "in": "header", "schema": map[string]any{"type": "string"},
			"description": "ETags of the copy the client holds; the current one answers 304."})
		responses["304"] = map[string]any{"description": "The client's copy is current.", "headers": map[string]any{"ETag": ref("headers/ETag")}}
	}
	for s := range problems {
		if name, ok := problemResponses[s]; ok {
			responses[strconv.Itoa(s)] = ref("responses/" + name)
		} else {
			responses[strconv.Itoa(s)] = map[string]any{"description": http.StatusText(s),
				"content": map[string]any{ProblemContentType: map[string]any{"schema": ref("schemas/Problem")}}}
		}
	}
	responses[strconv.Itoa(http.StatusTooManyRequests)] = map[string]any{
		"description": "The token's request rate limit is spent (rate_limited).",
		"headers":     map[string]any{"Retry-After": map[string]any{"description": "Seconds until the window ends.", "schema": map[string]any{"type": "integer"}}},
		"content":     map[string]any{ProblemContentType: map[string]any{"schema": ref("schemas/Problem")}}}
	op := map[string]any{"operationId": r.ID, "summary": r.Summary, "tags": r.Tags, "responses": responses}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if body != nil {
		op["requestBody"] = body
	}
	if r.Scope != "" {
		op["security"] = []any{map[string]any{"bearerAuth": []string{string(r.Scope)}}}
		op["x-required-scope"] = string(r.Scope)
	}
	return op
}

func parameter(name, in string, f reflect.StructField, required bool) map[string]any {
	schema := map[string]any{"type": "string"}
	if f.Type == uuidType {
		schema["format"] = "uuid"
	}
	if e := enumOf(f); e != nil {
		schema["enum"] = e
	}
	p := map[string]any{"name": name, "in": in, "required": required, "schema": schema}
	if d := f.Tag.Get("doc"); d != "" {
		p["description"] = d
	}
	return p
}

func ref(target string) map[string]any { return map[string]any{"$ref": "#/components/" + target} }

// eventOperation is what a subscriber's endpoint receives for one event type.
func eventOperation(reg huma.Registry, e EventDoc) map[string]any {
	envelope := map[string]any{
		"type":     "object",
		"required": []string{"id", "type", "timestamp", "data"},
		"properties": map[string]any{
			"id":        map[string]any{"type": "string", "description": "Event id, also the webhook-id header: deduplicate on it."},
			"type":      map[string]any{"const": e.Type},
			"timestamp": map[string]any{"type": "string", "format": "date-time"},
			"data":      reg.Schema(e.Payload, true, ""),
		},
	}
	header := func(name, doc string) map[string]any {
		return map[string]any{"name": name, "in": "header", "required": true, "schema": map[string]any{"type": "string"}, "description": doc}
	}
	return map[string]any{
		"operationId": "event." + e.Type,
		"summary":     e.Description,
		"tags":        []string{"events"},
		"security":    []any{},
		"parameters": []any{header("webhook-id", "The event id."), header("webhook-timestamp", "Unix seconds of this attempt."),
			header("webhook-signature", "Standard Webhooks v1 signatures (v1,<base64 HMAC-SHA256>), space separated.")},
		"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
			"schema": envelope, "example": map[string]any{"id": "evt_1", "type": e.Type, "timestamp": "2026-12-01T09:30:00Z", "data": e.Example}}}},
		"responses": map[string]any{"2XX": map[string]any{"description": "Delivered; any other answer is retried."}},
	}
}
