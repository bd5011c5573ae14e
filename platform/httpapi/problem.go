package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/database"
)

// Problem codes of the API contract, listed in the served /openapi.json.
const (
	CodeUnauthorized         = "unauthorized"
	CodeMalformedJSON        = "malformed_json"
	CodeInvalidQuery         = "invalid_query"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeValidationFailed     = "validation_failed"
	CodeNotFound             = "not_found"
	CodePreconditionFailed   = "precondition_failed"
	CodeConcurrencyConflict  = "concurrency_conflict"
	CodePayloadTooLarge      = "payload_too_large"
	CodeInternal             = "internal_error"
	CodeDatabaseUnavailable  = "database_unavailable"
)

// DatabaseRetryAfter is the Retry-After (seconds) of a 503 database_unavailable.
const DatabaseRetryAfter = "2"

// ProblemContentType is the media type of every error response.
const ProblemContentType = "application/problem+json"

// Problem is the RFC 9457 body of every error response.
type Problem struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail"`
	Code      string              `json:"code"`
	Errors    []apperr.FieldError `json:"errors,omitempty"`
	RequestID string              `json:"request_id,omitempty"`
}

// problemError is an error that already knows its HTTP answer; the helpers of this package return it.
type problemError struct {
	status int
	code   string
	detail string
	fields []apperr.FieldError
	cause  error
}

func (e *problemError) Error() string {
	if e.cause != nil {
		return e.detail + ": " + e.cause.Error()
	}
	return e.detail
}

func (e *problemError) Unwrap() error { return e.cause }

func newProblem(status int, code, detail string, fields ...apperr.FieldError) *problemError {
	return &problemError{status: status, code: code, detail: detail, fields: fields}
}

// InvalidQuery reports a bad query parameter (limit, cursor or a filter value) as 400 invalid_query.
func InvalidQuery(param, message string) error {
	return newProblem(http.StatusBadRequest, CodeInvalidQuery,
		fmt.Sprintf("invalid query parameter %q: %s", param, message),
		apperr.FieldError{Field: param, Message: message})
}

// ConflictAnswer is the problem code and detail a module gives the conflicts on one of its tables.
type ConflictAnswer struct {
	Code   string
	Detail string
}

// conflict is what a concurrency conflict error exposes (platform/concurrency.ConflictError).
type conflict interface {
	EntityType() string
	Table() string
	Key() string
}

// classify is the one mapping from an error to its problem; internal reports whether it must be masked.
func classify(err error, conflictCodes map[string]ConflictAnswer) (p Problem, internal bool) {
	var (
		pe  *problemError
		ve  *apperr.ValidationError
		nf  *apperr.NotFoundError
		sc  *apperr.StateConflictError
		tl  *apperr.TooLargeError
		ce  conflict
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &pe):
		p = Problem{Status: pe.status, Code: pe.code, Detail: pe.detail, Errors: pe.fields}
	case errors.As(err, &ve):
		p = Problem{Status: http.StatusUnprocessableEntity, Code: CodeValidationFailed,
			Detail: "the request has invalid fields", Errors: ve.Fields}
		if ve.Code != "" {
			p.Code, p.Detail = ve.Code, ve.Fields[0].Field+" "+ve.Fields[0].Message
		}
	case errors.As(err, &nf):
		p = Problem{Status: http.StatusNotFound, Code: CodeNotFound, Detail: nf.Error()}
	case errors.As(err, &sc):
		p = Problem{Status: http.StatusConflict, Code: sc.Code, Detail: sc.Detail}
	case errors.As(err, &tl):
		p = Problem{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge, Detail: tl.Error(),
			Errors: []apperr.FieldError{{Field: tl.Field, Message: tl.Detail}}}
	case errors.Is(err, apperr.ErrNotFound):
		p = Problem{Status: http.StatusNotFound, Code: CodeNotFound, Detail: "the resource does not exist"}
	case errors.Is(err, apperr.ErrPreconditionFailed):
		p = Problem{Status: http.StatusPreconditionFailed, Code: CodePreconditionFailed,
			Detail: "If-Match does not match the current version"}
	case errors.As(err, &ce) && isConflict(err):
		answer, ok := conflictCodes[ce.Table()]
		if !ok {
			answer = ConflictAnswer{Code: CodeConcurrencyConflict, Detail: ce.EntityType() + " was changed by another request"}
		}
		p = Problem{Status: http.StatusConflict, Code: answer.Code, Detail: answer.Detail}
	case errors.As(err, &mbe):
		p = tooLarge()
	case database.IsUnavailable(err):
		p = Problem{Status: http.StatusServiceUnavailable, Code: CodeDatabaseUnavailable,
			Detail: "the database is unavailable; retry later"}
	default:
		p = Problem{Status: http.StatusInternalServerError, Code: CodeInternal, Detail: "internal error"}
		internal = true
	}
	return withType(p), internal
}

func tooLarge() Problem {
	return withType(Problem{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
		Detail: fmt.Sprintf("the request body exceeds %d bytes", MaxBodyBytes)})
}
