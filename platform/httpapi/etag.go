package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/concurrency"
)

// SetETag sets the strong ETag "<version>" of the resource in the response.
func SetETag(c *gin.Context, version string) {
	c.Header("ETag", `"`+version+`"`)
}

// Precondition parses the request's If-Match once, for the service to check against the version it
// loads inside its unit of work.
func Precondition(c *gin.Context) concurrency.Precondition {
	return concurrency.IfMatch(c.Request.Header.Values("If-Match")...)
}

// NotModified answers 304 with the ETag when the request's If-None-Match lists the current version;
// the handler then writes nothing else.
func NotModified(c *gin.Context, version string) bool {
	if !concurrency.Matches(c.Request.Header.Values("If-None-Match"), version) {
		return false
	}
	SetETag(c, version)
	c.Status(http.StatusNotModified)
	return true
}
