package concurrency

import (
	"errors"
	"fmt"
)

// ErrConflict is what every concurrency conflict wraps: test with errors.Is(err, concurrency.ErrConflict).
var ErrConflict = errors.New("concurrency conflict")

// ConflictError says which entity another writer changed (or deleted) since it was read.
// Its fields stay unexported: GORM's error translator JSON-encodes errors looking for a Code.
type ConflictError struct {
	entity string
	table  string
	key    string
	cause  error
}

// NewConflict is the conflict of a raw-SQL conditional write that matched no row: the same error the
// plugin raises, so it maps to the same 409.
func NewConflict(table, key string) *ConflictError {
	return &ConflictError{entity: table, table: table, key: key}
}

// EntityType is the Go type name of the entity, e.g. "Proposal".
func (e *ConflictError) EntityType() string { return e.entity }

// Table is the table the entity lives in: the stable name conflict codes are keyed by.
func (e *ConflictError) Table() string { return e.table }

// Key is the primary key of the entity ("a,b" for composite keys).
func (e *ConflictError) Key() string { return e.key }

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("concurrency conflict: %s %s in %s was changed by another writer", e.entity, e.key, e.table)
	if e.cause != nil {
		msg += " (" + e.cause.Error() + ")"
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Cause is the database error behind the conflict (SQLSTATE 40001), or nil when the write matched no row.
func (e *ConflictError) Cause() error { return e.cause }
