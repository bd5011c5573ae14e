package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryDashboardQueryNamesAMetricTheBinaryExports reads deploy/grafana/*.json and checks each
// query against what a fresh replica serves on /metrics before any traffic: a renamed metric, or
// a series that only appears after its first event, would leave a panel empty.
func TestEveryDashboardQueryNamesAMetricTheBinaryExports(t *testing.T) {
	c := newCluster(t, clusterOptions{Replicas: 1})
	resp, err := http.Get(c.replicas[0].URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	exported := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			exported[strings.Fields(rest)[0]] = true
		}
	}
	if !strings.Contains(string(raw), `keelson_build_info{commit=`) || !strings.Contains(string(raw), `go_version="go`) {
		t.Fatalf("keelson_build_info with version, commit and go_version is missing:\n%s", grep(string(raw), "build_info"))
	}

	dashboards, _ := filepath.Glob(filepath.Join(repoRoot, "deploy", "grafana", "*.json"))
	if len(dashboards) == 0 {
		t.Fatal("no dashboard under deploy/grafana")
	}
	metricName := regexp.MustCompile(`\b(?:keelson|http|go|process)_[a-z0-9_]+`)
	labelsOut := regexp.MustCompile(`\b(?:by|without)\s*\([^)]*\)|\{[^}]*\}`) // label names are no metrics
	queries := 0
	for _, path := range dashboards {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			Panels []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, p := range dash.Panels {
			for _, target := range p.Targets {
				queries++
				names := metricName.FindAllString(labelsOut.ReplaceAllString(target.Expr, ""), -1)
				if len(names) == 0 {
					t.Errorf("%s, panel %q: query %q names no Keelson metric", filepath.Base(path), p.Title, target.Expr)
				}
				for _, name := range names {
					base := name
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						if b, ok := strings.CutSuffix(name, suffix); ok && exported[b] {
							base = b
						}
					}
					if !exported[base] {
						t.Errorf("%s, panel %q: %s is not exported by a fresh replica", filepath.Base(path), p.Title, name)
					}
				}
			}
		}
	}
	t.Logf("%d queries checked against %d exported metrics", queries, len(exported))
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
