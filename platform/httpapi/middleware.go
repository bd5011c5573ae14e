package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/correlation"
)

// RequestIDHeader carries the request id in and out.
const RequestIDHeader = "X-Request-Id"

// saneRequestID bounds what a client may choose as request id: it ends up in logs and events.
var saneRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// withRenderer makes the engine's renderer available to H and the middleware.
func withRenderer(r *renderer) gin.HandlerFunc {
	return func(c *gin.Context) { c.Set(rendererKey, r) }
}

// requestID reuses a sane X-Request-Id or makes one, echoes it and puts it in the request context.
func requestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(RequestIDHeader)
		if !saneRequestID.MatchString(id) {
			id = uuid.Must(uuid.NewV7()).String()
		}
		c.Header(RequestIDHeader, id)
		c.Request = c.Request.WithContext(correlation.With(c.Request.Context(), id))
		c.Next()
	}
}

// accessLog writes one line per request once the answer is known.
func accessLog(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		if c.GetBool(redispatchedKey) {
			return
		}
		status := c.Writer.Status()
		route := routeOf(c)
		level := slog.LevelInfo
		switch {
		case status >= http.StatusInternalServerError:
			level = slog.LevelError
		case status == http.StatusUnauthorized || route == "/healthz" || route == "/readyz":
			// Probes every few seconds and strangers without a token would drown the useful lines.
			level = slog.LevelDebug
		}
		logger.Log(c.Request.Context(), level, "http request",
			"method", requestMethod(c),
			"route", route,
			"path", c.Request.URL.Path,
			"status", status,
			"duration", time.Since(start),
			"request_id", correlation.ID(c.Request.Context()))
	}
}

// recovery turns a panic into a masked 500 and logs it with its stack.
func recovery(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if err, ok := rec.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(rec) // the server's own signal to drop the connection
			}
			logger.ErrorContext(c.Request.Context(), "panic in handler",
				"panic", fmt.Sprint(rec), "stack", string(debug.Stack()),
				"method", c.Request.Method, "route", routeOf(c),
				"request_id", correlation.ID(c.Request.Context()))
			p, _ := classify(fmt.Errorf("panic: %v", rec), nil)
			writeProblem(c, p)
		}()
		c.Next()
	}
}

// bodyLimit refuses declared oversize bodies at once and caps the others at MaxBodyBytes.
func bodyLimit() gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > MaxBodyBytes {
			writeProblem(c, tooLarge())
			return
		}
		if c.Request.Body != nil {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
		}
		c.Next()
	}
}

func unauthorized() Problem {
	return withType(Problem{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
		Detail: "a valid bearer token is required"})
}

func withType(p Problem) Problem {
	p.Type = "urn:keelson:problem:" + p.Code
	p.Title = http.StatusText(p.Status)
	return p
}
