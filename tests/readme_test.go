package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheReadmesLocalWalkthroughRunsAsWritten runs the README's one-shell block (conversation →
// proposal → accept → signed webhook) as it is, on a fresh database, an exchange and queues of its
// own, and free loopback ports in place of :8080 and :9000. Its build line is the only step not run:
// the binaries in ./bin are the ones this package built with the Dockerfile's command.
func TestTheReadmesLocalWalkthroughRunsAsWritten(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, found := strings.Cut(string(raw), "<!-- local walkthrough")
	_, block, _ := strings.Cut(after, "```sh\n")
	block, _, closed := strings.Cut(block, "```")
	if !found || !closed || !strings.HasPrefix(block, "make build") {
		t.Fatal("README.md has no local walkthrough block, starting with its build, after <!-- local walkthrough")
	}

	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o750); err != nil {
		t.Fatal(err)
	}
	for name, pkg := range map[string]string{"keelson": "./app", "receiver": "./examples/receiver"} {
		if err := os.Symlink(binary(t, pkg), filepath.Join(dir, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	db := newEmptyDatabase(t)
	ns := newNamespace() // removed from the broker when the package's tests end
	api, hooks := freePort(t), freePort(t)
	env := map[string]string{"DATABASE_URL": db.URL, "AMQP_EXCHANGE": ns, "AMQP_QUEUE_PREFIX": ns}
	script := strings.NewReplacer(
		"127.0.0.1:8080", fmt.Sprintf("127.0.0.1:%d", api),
		"127.0.0.1:9000", fmt.Sprintf("127.0.0.1:%d", hooks),
	).Replace(block)
	// The build line finds its binaries already built; every other line runs as written.
	prelude := "set -o pipefail\nmake() { [ \"$*\" = build ]; }\ngo() { [ \"$1\" = build ]; }\n"
	runGuideShell(t, dir, env, prelude+script)

	logs, err := os.ReadFile(filepath.Join(dir, "receiver.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, `msg="webhook received"`) && strings.Contains(line, "type=conversation.renamed") &&
			strings.Contains(line, "verified=true") {
			return
		}
	}
	t.Fatalf("the receiver logged no verified conversation.renamed:\n%s", logs)
}
