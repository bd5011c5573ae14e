package concurrency

import (
	"reflect"
	"time"
)

// Tokens remembers the concurrency-token values of an entity as last read from or written to the
// database, so Save still checks the original Status after a domain method changed it.
// Embed it (by value) in every model that has `gorm:"concurrencyToken"` fields.
// The map inside is never mutated, only replaced: copies of an entity keep their own originals.
type Tokens struct {
	loaded map[string]any
}

// snapshotValue copies what a token holds now, dereferencing pointers so a later change
// through the pointer does not move the original.
func snapshotValue(v any) any {
	if v == nil {
		return nil
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if t, ok := rv.Interface().(time.Time); ok {
		// PostgreSQL keeps microseconds; pgx truncates the same way when binding.
		return t.Truncate(time.Microsecond)
	}
	return rv.Interface()
}
