package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keelson/keelson/platform/correlation"
)

// DefaultReadyTimeout bounds /readyz: a dependency that does not answer in time is not ready.
const DefaultReadyTimeout = 2 * time.Second

// readiness is the answer of /readyz.
type readiness struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz runs every check at once under one deadline; the names of failing ones are reported, their
// errors only logged (the endpoint is unauthenticated).
func readyz(checks map[string]func(context.Context) error, timeout time.Duration, logger *slog.Logger) gin.HandlerFunc {
	names := make([]string, 0, len(checks))
	for name := range checks {
		names = append(names, name)
	}
	sort.Strings(names)
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), timeout)
		defer cancel()
		type result struct {
			name string
			err  error
		}
		// Buffered so a check that ignores ctx finishes into the void instead of blocking forever.
		results := make(chan result, len(names))
		for _, name := range names {
			go func() { results <- result{name, checks[name](ctx)} }()
		}
		body := readiness{Status: "ok", Checks: make(map[string]string, len(names))}
		for _, name := range names {
			body.Checks[name] = "timeout"
		}
	collect:
		for range names {
			select {
			case r := <-results:
				if r.err == nil {
					body.Checks[r.name] = "ok"
					continue
				}
				body.Checks[r.name] = "failed"
				logger.WarnContext(ctx, "readiness check failed", "check", r.name, "error", r.err.Error(),
					"request_id", correlation.ID(c.Request.Context()))
			case <-ctx.Done():
				break collect // the checks still out stay "timeout"
			}
		}
		status := http.StatusOK
		for _, v := range body.Checks {
			if v != "ok" {
				status = http.StatusServiceUnavailable
				body.Status = "unavailable"
			}
		}
		c.JSON(status, body)
	}
}

// MetricsHandler serves the metrics of g in Prometheus text format, for a listener of its own.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

func metricsHandler(g prometheus.Gatherer) gin.HandlerFunc {
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	return gin.WrapH(h)
}
