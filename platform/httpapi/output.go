package httpapi

// Versioned is the output of a route answering one entity, its version as a strong ETag.
type Versioned[T any] struct {
	ETag string `header:"ETag"`
	Body T
}

// Created is the output of a route that created an entity: its version, its address and the entity.
type Created[T any] struct {
	ETag     string `header:"ETag"`
	Location string `header:"Location"`
	Body     T
}
