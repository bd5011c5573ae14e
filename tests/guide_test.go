package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// guideStep is a block of docs/adding-a-module.md marked `<!-- guide: <kind> -->`: "shell" and
// "curl" blocks are run by bash in the copy, "app/modules.go" blocks are edits of that file.
type guideStep struct{ kind, text string }

var guideBlock = regexp.MustCompile("(?s)<!-- guide: (\\S+) -->\\n```[a-z]*\\n(.*?)\\n```")

// TestTheAddingAModuleGuideRunsAsWritten follows docs/adding-a-module.md on a copy of the repository:
// copy the example in, make the two edits of app/modules.go, build, migrate, serve, run the guide's
// curl commands, and see note.created reach the webhook subscriber. Only what must differ on a shared
// machine is substituted: the database URL, the API port, the receiver's address and the broker names.
func TestTheAddingAModuleGuideRunsAsWritten(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "adding-a-module.md"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []guideStep
	for _, m := range guideBlock.FindAllStringSubmatch(string(doc), -1) {
		steps = append(steps, guideStep{kind: m[1], text: m[2]})
	}
	if len(steps) != 5 {
		t.Fatalf("the guide has %d runnable blocks, want 5 (copy, import, list entry, build-migrate-serve, curl)", len(steps))
	}
	dir := copyRepository(t)
	db := newEmptyDatabase(t)
	port := freePort(t)
	hooks := &hookRecorder{}
	receiver := httptest.NewServer(hooks)
	t.Cleanup(receiver.Close)
	ns := newNamespace() // removed from the broker when the package's tests end
	env := map[string]string{
		"HTTP_ADDR":         fmt.Sprintf("127.0.0.1:%d", port),
		"AMQP_EXCHANGE":     ns,
		"AMQP_QUEUE_PREFIX": ns,
	}
	substitute := strings.NewReplacer(
		"postgres://postgres@127.0.0.1:5432/keelson?sslmode=disable", db.URL,
		"127.0.0.1:8080", fmt.Sprintf("127.0.0.1:%d", port),
		"http://127.0.0.1:9000/hooks", receiver.URL+"/hooks",
	)
	var curlOut string
	for _, s := range steps {
		switch s.kind {
		case "app/modules.go":
			editModules(t, filepath.Join(dir, "app", "modules.go"), s.text)
		case "shell":
			runGuideShell(t, dir, env, substitute.Replace(s.text))
			if strings.Contains(s.text, "keelson serve &") {
				waitReady(t, port)
			}
		case "curl":
			curlOut = runGuideShell(t, dir, env, substitute.Replace(s.text))
		default:
			t.Fatalf("unknown guide block kind %q", s.kind)
		}
	}
	codes := strings.Fields(curlOut)
	if len(codes) == 0 || codes[len(codes)-1] != "412" {
		t.Fatalf("the second edit from the same version did not answer 412; curl printed:\n%s", curlOut)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !hooks.has("note.created") {
		if time.Now().After(deadline) {
			t.Fatalf("note.created never reached the note.* subscriber; received %v", hooks.types())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// copyRepository copies the repository's tracked and untracked, not ignored files into a temp dir.
func copyRepository(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		src := filepath.Join(repoRoot, f)
		info, err := os.Stat(src)
		if err != nil || info.IsDir() {
			continue // deleted in the work tree, or a submodule
		}
		raw, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, raw, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// editModules applies one edit the guide states: an import line goes into the import block, a
// return line replaces the list returned.
func editModules(t *testing.T, path, edit string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src, line := string(raw), strings.TrimSpace(edit)
	switch {
	case strings.HasPrefix(line, `"`):
		src = strings.Replace(src, "import (\n", "import (\n\t"+line+"\n", 1)
	case strings.HasPrefix(line, "return []module.Module{"):
		re := regexp.MustCompile(`(?m)^\s*return \[\]module\.Module\{.*$`)
		if !re.MatchString(src) {
			t.Fatal("app/modules.go has no return line of the module list")
		}
		src = re.ReplaceAllString(src, "\t"+line)
	default:
		t.Fatalf("the guide states an edit of app/modules.go this test cannot apply: %q", line)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runGuideShell runs a block with bash in dir and returns its output. A background process the block
// starts (a trailing &) is stopped when the test ends.
func runGuideShell(t *testing.T, dir string, env map[string]string, script string) string {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pids")
	script = regexp.MustCompile(`(?m)&\s*$`).ReplaceAllString(script, "& echo $! >> "+pidFile)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = environ(env)
	logs, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = logs.Close()
		if t.Failed() {
			if raw, err := os.ReadFile(logs.Name()); err == nil && len(raw) > 0 {
				t.Logf("background output:\n%s", tailString(string(raw), 4000))
			}
		}
	})
	// A file, not a pipe: a background process keeps its output open after bash exits.
	cmd.Stdout, cmd.Stderr = logs, logs
	err = cmd.Run()
	raw, _ := os.ReadFile(logs.Name())
	out := string(raw)
	if raw, readErr := os.ReadFile(pidFile); readErr == nil {
		for _, pid := range strings.Fields(string(raw)) {
			var p int
			if _, err := fmt.Sscan(pid, &p); err == nil {
				t.Cleanup(func() { _ = syscall.Kill(p, syscall.SIGTERM) })
			}
		}
	}
	if err != nil {
		t.Fatalf("guide block failed: %v\n%s\n--- output\n%s", err, script, tailString(out, 4000))
	}
	return out
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func waitReady(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("keelson serve not ready on port %d after 90s", port)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hookRecorder is the webhook receiver of the guide: it records the type of every event it gets.
type hookRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (h *hookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Type string `json:"type"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	h.mu.Lock()
	h.seen = append(h.seen, body.Type)
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookRecorder) has(eventType string) bool {
	for _, s := range h.types() {
		if s == eventType {
			return true
		}
	}
	return false
}

func (h *hookRecorder) types() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}
