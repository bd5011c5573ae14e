package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/correlation"
)

// redispatchedKey marks the outer HEAD request whose answer the inner GET gave: metrics and the
// access log count the inner one only.
const redispatchedKey = "httpapi.redispatched"

type headKey struct{}

// serveHeadAsGet answers HEAD on any path by running its GET route, whoever declared it (gin
// handlers or an adapter mounting on the engine): same status and headers, no body.
func serveHeadAsGet(engine *gin.Engine, c *gin.Context) {
	ctx := context.WithValue(c.Request.Context(), headKey{}, true)
	req := c.Request.Clone(ctx)
	req.Method = http.MethodGet
	req.Header.Set(RequestIDHeader, correlation.ID(ctx))
	c.Set(redispatchedKey, true)
	engine.ServeHTTP(bodyless{c.Writer}, req)
	// Sent now, or gin's own 404 fallback would overwrite the inner answer's Content-Type.
	c.Writer.WriteHeaderNow()
	c.Abort()
}

// requestMethod is the method the client sent: HEAD for a GET run on behalf of a HEAD.
func requestMethod(c *gin.Context) string {
	if head, _ := c.Request.Context().Value(headKey{}).(bool); head {
		return http.MethodHead
	}
	return c.Request.Method
}

// bodyless passes status and headers through and drops the body, as a HEAD answer must.
type bodyless struct{ gin.ResponseWriter }

func (b bodyless) Write(p []byte) (int, error) { return len(p), nil }

func (b bodyless) WriteString(s string) (int, error) { return len(s), nil }
