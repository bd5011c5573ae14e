package telemetry

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo is the keelson_build_info gauge: always 1, labelled with what is running, so a
// dashboard shows which version each replica runs and when a rollout reached them all.
func BuildInfo() prometheus.Collector {
	version, commit := "unknown", "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				commit = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "keelson_build_info",
		Help:        "Always 1; the labels say which build runs: version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "go_version": runtime.Version()},
	})
	g.Set(1)
	return g
}
