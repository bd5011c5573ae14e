package tests

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperationsDocumentsEveryVariable keeps the configuration table of docs/operations.md equal
// to what the binary reads (`keelson env`), names and defaults.
func TestOperationsDocumentsEveryVariable(t *testing.T) {
	out, err := exec.Command(keelson(t), "env").Output()
	if err != nil {
		t.Fatalf("keelson env: %v", err)
	}
	defaults := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, def, ok := strings.Cut(sc.Text(), "=")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		defaults[name] = def
	}

	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(raw), "## Configuration")
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		documented[name] = true
		want, ok := defaults[name]
		if !ok {
			t.Errorf("docs/operations.md documents %s, which keelson does not read", name)
			continue
		}
		switch doc := strings.TrimSpace(cells[1]); {
		case doc == "—":
			if want != "" {
				t.Errorf("%s: documented without a default, keelson's is %q", name, want)
			}
		case strings.HasPrefix(doc, "`"):
			if got := strings.Trim(doc, "`"); got != want {
				t.Errorf("%s: documented default %q, keelson's is %q", name, got, want)
			}
		}
	}
	for name := range defaults {
		if !documented[name] {
			t.Errorf("keelson reads %s, which docs/operations.md does not document", name)
		}
	}
}
