package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/correlation"
)

// rendererKey is where the engine leaves its renderer in the gin context for H and the middleware.
const rendererKey = "keelson.httpapi.renderer"

// renderer writes errors as problem+json; it carries the per-engine conflict codes and logger.
type renderer struct {
	logger        *slog.Logger
	conflictCodes map[string]ConflictAnswer
}

func rendererOf(c *gin.Context) *renderer {
	if v, ok := c.Get(rendererKey); ok {
		if r, ok := v.(*renderer); ok {
			return r
		}
	}
	// Outside an engine of this package (a bare gin router in a test) errors are still answered.
	return &renderer{logger: slog.Default()}
}

// writeError answers err as problem+json and aborts the chain; 500s are masked and logged.
func writeError(c *gin.Context, err error) {
	r := rendererOf(c)
	p, internal := classify(err, r.conflictCodes)
	if internal {
		r.logger.ErrorContext(c.Request.Context(), "request failed",
			"error", err.Error(), "method", c.Request.Method, "route", routeOf(c),
			"request_id", correlation.ID(c.Request.Context()))
	}
	if p.Code == CodeDatabaseUnavailable {
		r.logger.WarnContext(c.Request.Context(), "database unavailable",
			"error", err.Error(), "method", c.Request.Method, "route", routeOf(c),
			"request_id", correlation.ID(c.Request.Context()))
	}
	writeProblem(c, p)
}

func writeProblem(c *gin.Context, p Problem) {
	p.RequestID = correlation.ID(c.Request.Context())
	if p.Status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", "Bearer")
	}
	if p.Code == CodeDatabaseUnavailable {
		c.Header("Retry-After", DatabaseRetryAfter)
	}
	if c.Writer.Written() {
		// Headers are gone; the status already sent stands and the error is only logged by the caller.
		c.Abort()
		return
	}
	body, err := json.Marshal(p)
	if err != nil {
		body = []byte(`{"status":500,"code":"internal_error","detail":"internal error"}`)
	}
	c.Data(p.Status, ProblemContentType, body)
	c.Abort()
}

// routeOf is the route template for logs and metrics; unmatched requests share one label.
func routeOf(c *gin.Context) string {
	if r := c.FullPath(); r != "" {
		return r
	}
	return "unmatched"
}

// H adapts a handler that returns an error: the error is answered as problem+json in one place.
func H(fn func(c *gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := fn(c); err != nil {
			_ = c.Error(err)
			writeError(c, err)
		}
	}
}
