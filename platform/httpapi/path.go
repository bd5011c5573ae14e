package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
)

// PathUUID reads a UUID path parameter; anything else names no resource, so it is 404 not_found
// (the error unwraps to apperr.ErrNotFound).
func PathUUID(c *gin.Context, name string) (uuid.UUID, error) {
	raw := c.Param(name)
	id, err := uuid.Parse(raw)
	if err != nil || len(raw) != 36 {
		return uuid.Nil, &problemError{status: http.StatusNotFound, code: CodeNotFound,
			detail: "no resource has this id", cause: apperr.ErrNotFound}
	}
	return id, nil
}

// QueryUUID reads an optional UUID query parameter: absent or empty is uuid.Nil, anything but a
// 36-character UUID is 400 invalid_query.
func QueryUUID(c *gin.Context, name string) (uuid.UUID, error) {
	raw := c.Query(name)
	if raw == "" {
		return uuid.Nil, nil
	}
	id, err := uuid.Parse(raw)
	if err != nil || len(raw) != 36 {
		return uuid.Nil, InvalidQuery(name, "must be a UUID")
	}
	return id, nil
}
