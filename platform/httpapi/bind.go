package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/apperr"
)

// MaxBodyBytes is the largest request body accepted (1 MiB); larger ones get 413.
const MaxBodyBytes = 1 << 20

// BindOption changes how BindJSON treats a request.
type BindOption int

// AllowEmpty lets an empty body (with or without a JSON content type) stand for {}.
const AllowEmpty BindOption = 1

// BindJSON decodes the JSON object body into dst: 415 when the body is not application/json,
// 413 over MaxBodyBytes, 400 when it is not well-formed JSON, 422 for unknown fields and wrong types.
func BindJSON(c *gin.Context, dst any, opts ...BindOption) error {
	allowEmpty := false
	for _, o := range opts {
		if o == AllowEmpty {
			allowEmpty = true
		}
	}
	contentType := c.GetHeader("Content-Type")
	var body []byte
	if c.Request.Body != nil {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return newProblem(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, tooLarge().Detail)
			}
			return newProblem(http.StatusBadRequest, CodeMalformedJSON, "the request body could not be read")
		}
	}
	empty := len(bytes.TrimSpace(body)) == 0
	if empty && allowEmpty && (contentType == "" || isJSONMediaType(contentType)) {
		return nil
	}
	if !isJSONMediaType(contentType) {
		return newProblem(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			"the request body must be application/json")
	}
	if empty {
		return newProblem(http.StatusBadRequest, CodeMalformedJSON, "the request body is empty")
	}
	if fe := checkFieldNames(body, reflect.TypeOf(dst), ""); fe != nil {
		return &problemError{status: http.StatusUnprocessableEntity, code: CodeValidationFailed,
			detail: "the request has invalid fields", fields: []apperr.FieldError{*fe}}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return newProblem(http.StatusBadRequest, CodeMalformedJSON, "the request body must hold a single JSON value")
	}
	return nil
}

func isJSONMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// decodeError turns an encoding/json error into the problem the client can act on.
func decodeError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		inv    *json.InvalidUnmarshalError
	)
	switch {
	case errors.As(err, &syntax):
		return newProblem(http.StatusBadRequest, CodeMalformedJSON,
			fmt.Sprintf("the request body is not valid JSON (offset %d)", syntax.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newProblem(http.StatusBadRequest, CodeMalformedJSON, "the request body is truncated JSON")
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return &problemError{status: http.StatusUnprocessableEntity, code: CodeValidationFailed,
			detail: "the request has invalid fields", cause: err,
			fields: []apperr.FieldError{{Field: field, Message: "must be " + jsonKind(typ.Type)}}}
	case errors.As(err, &inv):
		return err // a programming error: 500
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &problemError{status: http.StatusUnprocessableEntity, code: CodeValidationFailed,
			detail: "the request has unknown fields", cause: err,
			fields: []apperr.FieldError{{Field: name, Message: "unknown field"}}}
	default:
		// A field's own UnmarshalJSON/UnmarshalText refused the value (a malformed UUID or time).
		return &problemError{status: http.StatusUnprocessableEntity, code: CodeValidationFailed,
			detail: "the request has invalid fields", cause: err,
			fields: []apperr.FieldError{{Field: "body", Message: strings.TrimPrefix(err.Error(), "json: ")}}}
	}
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// jsonKind names the JSON type a Go type expects, for field error messages.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	// UUIDs, times and other text-encoded values travel as JSON strings whatever their Go kind.
	if t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	default:
		return "of type " + t.String()
	}
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checkFieldNames refuses a key that names a struct field in another case ("URL" for "url"): the
// decoder would match it, and take one of {"url":…,"URL":…} silently. Free-form values (maps of
// any, raw JSON) keep their keys as given; a body that does not decode is left to the decoder.
func checkFieldNames(raw []byte, t reflect.Type, path string) *apperr.FieldError {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || !hasStructFields(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		fields := jsonFieldsOf(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if ft, ok := fields[k]; ok {
				if fe := checkFieldNames(obj[k], ft, joinPath(path, k)); fe != nil {
					return fe
				}
				continue
			}
			for name := range fields {
				if !strings.EqualFold(k, name) {
					continue
				}
				if _, both := obj[name]; both {
					return &apperr.FieldError{Field: joinPath(path, name),
						Message: "is given twice, as " + name + " and " + k + "; field names are case-sensitive"}
				}
				return &apperr.FieldError{Field: joinPath(path, k),
					Message: "is not a field; the field is " + name + " (field names are case-sensitive)"}
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, item := range items {
			if fe := checkFieldNames(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); fe != nil {
				return fe
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		for k, v := range obj {
			if fe := checkFieldNames(v, t.Elem(), joinPath(path, k)); fe != nil {
				return fe
			}
		}
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decodesItself: the decoder hands the value to the type's own method, which sees no field names.
func decodesItself(t reflect.Type) bool {
	return t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)
}

// structFields caches, per type, whether a struct whose fields the decoder matches is reachable in it.
var structFields sync.Map // reflect.Type → bool

func hasStructFields(t reflect.Type) bool {
	if v, ok := structFields.Load(t); ok {
		return v.(bool)
	}
	structFields.Store(t, false) // a recursive type is answered by its other branches
	found := reachesStruct(t)
	structFields.Store(t, found)
	return found
}

func reachesStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if decodesItself(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Slice, reflect.Array, reflect.Map:
		return hasStructFields(t.Elem())
	default:
		return false
	}
}

// jsonFieldsOf maps the JSON names the decoder matches in struct t (embedded structs flattened) to their types.
func jsonFieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, typ := range jsonFieldsOf(ft) {
					if _, ok := out[n]; !ok {
						out[n] = typ
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}
