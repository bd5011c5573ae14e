package hosttest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric reads a metric family of g: the sum over its samples whose labels include every given
// name, value pair (none = all samples). A counter, gauge or untyped sample counts its value; a
// histogram or summary sample counts its number of observations. A family not gathered yet reads 0,
// so tests can poll a metric before its first sample.
func Metric(t testing.TB, g prometheus.Gatherer, family string, labels ...string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("hosttest: metric labels must be name, value pairs: %q", labels)
		return 0
	}
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("hosttest: gather metrics: %v", err)
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
	samples:
		for _, m := range f.GetMetric() {
			for i := 0; i < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
						break
					}
				}
				if !found {
					continue samples
				}
			}
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue() +
				float64(m.GetHistogram().GetSampleCount()) + float64(m.GetSummary().GetSampleCount())
		}
	}
	return total
}
