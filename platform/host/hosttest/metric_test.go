package hosttest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestMetricSumsTheSamplesWithTheLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	handled := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "handled_total"}, []string{"consumer", "outcome"})
	depth := prometheus.NewGauge(prometheus.GaugeOpts{Name: "depth"})
	latency := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latency_seconds"})
	reg.MustRegister(handled, depth, latency)
	handled.WithLabelValues("a", "ok").Add(3)
	handled.WithLabelValues("a", "failed").Add(1)
	handled.WithLabelValues("b", "ok").Add(5)
	depth.Set(-2)
	for _, v := range []float64{0.1, 7, 0.2} {
		latency.Observe(v)
	}

	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"handled_total", nil, 9},
		{"handled_total", []string{"consumer", "a"}, 4},
		{"handled_total", []string{"consumer", "a", "outcome", "ok"}, 3},
		{"handled_total", []string{"outcome", "ok"}, 8},
		{"handled_total", []string{"consumer", "c"}, 0},
		{"handled_total", []string{"other", "a"}, 0},
		{"depth", nil, -2},
		{"latency_seconds", nil, 3},
		{"never_registered", nil, 0},
	} {
		if got := hosttest.Metric(t, reg, c.family, c.labels...); got != c.want {
			t.Errorf("Metric(%s, %q) = %v, want %v", c.family, c.labels, got, c.want)
		}
	}

	var spy failSpy
	hosttest.Metric(&spy, reg, "handled_total", "consumer")
	if spy.msg == "" {
		t.Fatal("an odd list of labels was accepted")
	}
}
