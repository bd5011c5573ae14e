package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// MetricsRegistry registers the HTTP metrics and serves every registered metric on /metrics.
type MetricsRegistry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// httpMetrics counts requests and times them by method, route template and status.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	labels := []string{"method", "route", "status"}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total",
		Help: "HTTP requests answered, by method, route template and status.",
	}, labels)
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "http_request_duration_seconds",
		Help: "Time to answer HTTP requests, by method, route template and status.",
		// Six buckets, not DefBuckets' eleven: series = routes × methods × statuses × buckets.
		Buckets: []float64{0.005, 0.025, 0.1, 0.5, 2.5, 10},
	}, labels)
	var err error
	if requests, err = register(reg, requests); err != nil {
		return nil, err
	}
	if duration, err = register(reg, duration); err != nil {
		return nil, err
	}
	return &httpMetrics{requests: requests, duration: duration}, nil
}

// register reuses a collector already registered under the same name (two engines on one registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

func (m *httpMetrics) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		if c.GetBool(redispatchedKey) {
			return
		}
		route := routeOf(c)
		status := strconv.Itoa(c.Writer.Status())
		method := methodLabel(requestMethod(c))
		m.requests.WithLabelValues(method, route, status).Inc()
		m.duration.WithLabelValues(method, route, status).Observe(time.Since(start).Seconds())
	}
}

// methodLabel keeps label values bounded: clients may send any method name.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
