// Package apperr is the error taxonomy of the application layer. Modules return these kinds
// (or errors that unwrap to them); platform/httpapi maps them to problem+json in one place.
package apperr

import (
	"errors"
	"fmt"
)

// ErrNotFound is the kind of every "no such entity" error.
var ErrNotFound = errors.New("not found")

// ErrPreconditionFailed is returned when an If-Match version is stale.
var ErrPreconditionFailed = errors.New("precondition failed")

// NotFoundError names the entity that does not exist.
type NotFoundError struct {
	Entity string
	ID     string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %s not found", e.Entity, e.ID) }

// Unwrap makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// NotFound builds a NotFoundError.
func NotFound(entity, id string) error { return &NotFoundError{Entity: entity, ID: id} }

// FieldError is one invalid input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every invalid field of one input.
type ValidationError struct {
	Fields []FieldError
	Code   string // problem code; "" = validation_failed
}

func (e *ValidationError) Error() string {
	if len(e.Fields) == 0 {
		return "validation failed"
	}
	return fmt.Sprintf("validation failed: %s: %s", e.Fields[0].Field, e.Fields[0].Message)
}

// Invalid builds a ValidationError for one field.
func Invalid(field, message string) error {
	return &ValidationError{Fields: []FieldError{{Field: field, Message: message}}}
}

// Refused builds a ValidationError with its own problem code, for a rule clients must tell apart.
func Refused(code, field, message string) error {
	return &ValidationError{Fields: []FieldError{{Field: field, Message: message}}, Code: code}
}

// Validator collects field errors; Err returns nil when there are none.
type Validator struct{ fields []FieldError }

// Check records message for field unless ok.
func (v *Validator) Check(ok bool, field, message string) {
	if !ok {
		v.fields = append(v.fields, FieldError{Field: field, Message: message})
	}
}

// Err returns the collected errors as a *ValidationError, or nil.
func (v *Validator) Err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields}
}

// StateConflictError refuses a request that contradicts what is stored (409 with its own code), e.g.
// an id already used for something else; unlike a concurrency conflict, retrying does not help.
type StateConflictError struct {
	Code   string
	Detail string
}

func (e *StateConflictError) Error() string { return e.Code + ": " + e.Detail }

// StateConflict builds a StateConflictError.
func StateConflict(code, detail string) error { return &StateConflictError{Code: code, Detail: detail} }

// TooLargeError refuses an input larger than a configured limit (413), such as an event's data
// beyond the payload size a tenant may send.
type TooLargeError struct {
	Field  string
	Detail string
}

func (e *TooLargeError) Error() string { return e.Field + " " + e.Detail }

// TooLarge builds a TooLargeError.
func TooLarge(field, detail string) error { return &TooLargeError{Field: field, Detail: detail} }
