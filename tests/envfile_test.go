package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"
)

// envDefaults runs `keelson env` and returns its output and the NAME=value pairs it declares.
func envDefaults(t *testing.T) ([]byte, map[string]string) {
	t.Helper()
	out, err := exec.Command(keelson(t), "env").Output()
	if err != nil {
		t.Fatalf("keelson env: %v", err)
	}
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("keelson env: line %q is neither a comment nor NAME=value", line)
		}
		want[name] = value
	}
	if len(want) < 10 {
		t.Fatalf("keelson env declared %d variables:\n%s", len(want), out)
	}
	return out, want
}

// TestTheEnvFileLoadsUnchangedThroughComposeAndTheShell writes `keelson env` to a file and reads it
// back the two ways operators do: docker-compose's env_file and `set -a; . file`. Every variable
// must come back with exactly its default, no comment glued to a value.
func TestTheEnvFileLoadsUnchangedThroughComposeAndTheShell(t *testing.T) {
	out, want := envDefaults(t)
	dir := t.TempDir()
	envFile := filepath.Join(dir, "keelson.env")
	if err := os.WriteFile(envFile, out, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("set -a; . file", func(t *testing.T) {
		cmd := exec.Command("sh", "-c", `set -a; . "$1"; env -0`, "sh", envFile)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		loaded := map[string]string{}
		for _, kv := range strings.Split(string(got), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				loaded[k] = v
			}
		}
		assertLoaded(t, want, loaded)
	})

	t.Run("compose env_file", func(t *testing.T) {
		composeBin, err := exec.LookPath("docker-compose")
		if err != nil {
			t.Skip("docker-compose is not installed")
		}
		composeFile := filepath.Join(dir, "compose.yml")
		spec := "version: \"3.8\"\nservices:\n  app:\n    image: keelson-envfile-test\n    env_file: keelson.env\n"
		if err := os.WriteFile(composeFile, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		project := "keelson-envfile-" + uuid.NewString()[:8]
		cmd := exec.CommandContext(ctx, composeBin, "-f", composeFile, "-p", project, "config")
		cmd.Dir = dir
		got, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docker-compose config: %v\n%s", err, got)
		}
		var resolved struct {
			Services map[string]struct {
				Environment map[string]*string `yaml:"environment"`
			} `yaml:"services"`
		}
		if err := yaml.Unmarshal(got, &resolved); err != nil {
			t.Fatalf("docker-compose config output: %v\n%s", err, got)
		}
		loaded := map[string]string{}
		for k, v := range resolved.Services["app"].Environment {
			if v != nil {
				loaded[k] = *v
			}
		}
		assertLoaded(t, want, loaded)
	})
}

func assertLoaded(t *testing.T, want, loaded map[string]string) {
	t.Helper()
	for name, value := range want {
		got, ok := loaded[name]
		if !ok {
			t.Errorf("%s is missing after loading the env file", name)
			continue
		}
		if got != value {
			t.Errorf("%s = %q after loading the env file, want %q", name, got, value)
		}
	}
}

// TestAFatalStartErrorIsOneLogLineInTheConfiguredFormat: an operator's log pipeline parses the
// line that says why the process stopped like every other line.
func TestAFatalStartErrorIsOneLogLineInTheConfiguredFormat(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, keelson(t), "serve")
			cmd.Env = environ(map[string]string{"LOG_FORMAT": format, "JOB_WORKERS": "many"})
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("serve with JOB_WORKERS=many succeeded:\n%s", out)
			}
			line := strings.TrimSpace(string(out))
			if strings.Contains(line, "\n") || !strings.Contains(line, "JOB_WORKERS") {
				t.Fatalf("want one line naming JOB_WORKERS, got:\n%s", out)
			}
			switch format {
			case "json":
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] != "ERROR" {
					t.Fatalf("not a JSON log line at ERROR: %v\n%s", err, line)
				}
			case "text":
				if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, `msg="keelson stopped"`) {
					t.Fatalf("not a text log line at ERROR: %s", line)
				}
			}
		})
	}
}
