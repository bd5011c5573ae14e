package httpapi

import (
	"fmt"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/apperr"
)

// SetETag sets the strong ETag "<version>" of the resource in the response.
func SetETag(c *gin.Context, version string) {
	c.Header("ETag", `"`+version+`"`)
}

// IfMatch checks the request's If-Match against the current version: absent → nil; "*" or a strong
// "<version>" among the listed tags → nil; anything else (weak W/"v" tags included) → apperr.ErrPreconditionFailed.
func IfMatch(c *gin.Context, currentVersion string) error {
	values := c.Request.Header.Values("If-Match")
	if len(values) == 0 {
		return nil
	}
	want := `"` + currentVersion + `"`
	for _, v := range values {
		for tag := range strings.SplitSeq(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || tag == want {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: If-Match %q, current version %q", apperr.ErrPreconditionFailed,
		strings.Join(values, ", "), currentVersion)
}
