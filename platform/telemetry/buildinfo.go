package telemetry

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Stamped at build time by `make build` and the Dockerfile:
// -ldflags "-X github.com/keelson/keelson/platform/telemetry.version=… .commit=… .date=…".
var version, commit, date string

// Build says which build is running: stamped at build time, or else what the Go toolchain
// recorded (a module version under `go install`, the VCS revision of a build in a checkout).
type Build struct {
	Version   string // "(devel)" for a plain go build of a checkout; "unknown" when not known
	Commit    string // "unknown" when not known
	Date      string // commit or build time, RFC 3339; "unknown" when not known
	Modified  bool   // built from a checkout with uncommitted changes (VCS information only)
	GoVersion string
}

// ReadBuild returns the running build's information.
func ReadBuild() Build {
	b := Build{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Date == "" {
					b.Date = s.Value
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	for _, f := range []*string{&b.Version, &b.Commit, &b.Date} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return b
}

// BuildInfo is the keelson_build_info gauge: always 1, labelled with what is running, so a
// dashboard shows which version each replica runs and when a rollout reached them all.
func BuildInfo() prometheus.Collector {
	b := ReadBuild()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "keelson_build_info",
		Help:        "Always 1; the labels say which build runs: version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "go_version": b.GoVersion},
	})
	g.Set(1)
	return g
}
