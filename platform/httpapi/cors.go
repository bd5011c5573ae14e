package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"
)

// CORS answers browsers calling the API from the allowed origins only; with none allowed (the
// default) no CORS header is ever sent, so browsers keep other sites' pages from reading answers.
const (
	corsAllowMethods  = "GET, HEAD, POST, PUT, PATCH, DELETE"
	corsAllowHeaders  = "Authorization, Content-Type, If-Match, If-None-Match, Idempotency-Key, X-Request-Id"
	corsExposeHeaders = "ETag, Location, Link, Retry-After, X-Request-Id"
	corsMaxAgeSeconds = "600"
)

// CheckOrigin accepts what a browser sends as Origin: scheme://host[:port], nothing more.
func CheckOrigin(origin string) error {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q is not an origin like https://app.example.com", origin)
	}
	return nil
}

func cors(allowed []string) (gin.HandlerFunc, error) {
	set := make(map[string]bool, len(allowed))
	for _, o := range allowed {
		if err := CheckOrigin(o); err != nil {
			return nil, fmt.Errorf("httpapi: CORS: %w", err)
		}
		set[strings.ToLower(o)] = true
	}
	return func(c *gin.Context) {
		if len(set) == 0 {
			c.Next()
			return
		}
		origin := c.GetHeader("Origin")
		h := c.Writer.Header()
		h.Add("Vary", "Origin") // answers differ by Origin: caches must not share them
		if origin == "" || !set[strings.ToLower(origin)] {
			c.Next()
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		if c.Request.Method == http.MethodOptions && c.GetHeader("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", corsAllowMethods)
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAgeSeconds)
			c.AbortWithStatus(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		c.Next()
	}, nil
}
