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
	"strings"

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
