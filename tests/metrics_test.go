package tests

import (
	"strconv"
	"strings"
)

// sumMetric adds the samples of family (exact name, labels ignored unless labelContains is set)
// in Prometheus text format.
func sumMetric(text, family, labelContains string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		nameAndLabels, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		name, labels, _ := strings.Cut(nameAndLabels, "{")
		if name != family || (labelContains != "" && !strings.Contains(labels, labelContains)) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.Fields(value)[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}
