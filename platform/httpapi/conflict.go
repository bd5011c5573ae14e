package httpapi

// isConflict confirms that an error exposing an entity type is a concurrency conflict.
func isConflict(error) bool { return true }
