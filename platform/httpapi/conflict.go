package httpapi

import (
	"errors"

	"github.com/keelson/keelson/platform/concurrency"
)

// isConflict confirms that an error exposing an entity type is a concurrency conflict.
func isConflict(err error) bool { return errors.Is(err, concurrency.ErrConflict) }
