package httpapi

import "github.com/google/uuid"

// ByID is the input of a route on one entity named by its path id ("/{id}") that reads nothing else.
type ByID struct {
	ID uuid.UUID `path:"id"`
}
