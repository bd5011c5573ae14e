package tests

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// cliResult is what one run of the binary left: its exit code and both streams.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runKeelson runs the binary with args and env added to the test's environment.
func runKeelson(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	bin := keelson(t) // built on first use: the build is not the command's time
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = environ(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("keelson %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestHelpExitsZeroAndPrintsTheUsageOfEveryCommand(t *testing.T) {
	commands := []string{"serve", "migrate", "env", "healthcheck", "version", "tokens", "tenants", "dlq", "secrets"}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := runKeelson(t, nil, args...)
		if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "Usage: keelson COMMAND") {
			t.Fatalf("keelson %s: exit %d, stdout %q, stderr %q", args[0], r.code, r.stdout, r.stderr)
		}
		for _, c := range commands {
			if !strings.Contains(r.stdout, "\n  "+c+" ") {
				t.Errorf("keelson %s does not list %s:\n%s", args[0], c, r.stdout)
			}
		}
	}
	// A broken configuration does not stand in the way of help: nothing is read.
	broken := map[string]string{"JOB_WORKERS": "many", "DATABASE_URL": "mysql://nowhere"}
	for _, c := range commands {
		for _, args := range [][]string{{c, "--help"}, {c, "-h"}, {"help", c}} {
			r := runKeelson(t, broken, args...)
			if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "Usage: keelson "+c) {
				t.Errorf("keelson %s: exit %d, stdout %q, stderr %q; want exit 0 and the usage of %s",
					strings.Join(args, " "), r.code, r.stdout, r.stderr, c)
			}
		}
	}
	r := runKeelson(t, broken, "tokens", "create", "--tenant", "acme", "--help")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: keelson tokens") {
		t.Errorf("--help after a subcommand's flags: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// The binary under test is built with the Dockerfile's command and the build arguments of stamp.
func TestVersionPrintsTheBuildStampedAtBuildTime(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		r := runKeelson(t, map[string]string{"JOB_WORKERS": "many"}, arg)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("keelson %s: exit %d, stderr %q", arg, r.code, r.stderr)
		}
		for _, want := range []string{"keelson " + stamp["VERSION"] + "\n", "commit: " + stamp["COMMIT"], "built:  " + stamp["BUILD_DATE"], "go:     go1."} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("keelson %s prints %q, want it to contain %q", arg, r.stdout, want)
			}
		}
	}
}

// Errors meant for the person at the terminal are plain text on stderr, nothing on stdout, with the
// exit codes the README documents: 2 for a command called wrongly, 1 for one that failed.
func TestAPersonsErrorsArePlainTextOnStderrWithTheDocumentedExitCodes(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		says string
	}{
		{"no command", nil, nil, 2, "a command is required"},
		{"an unknown command", nil, []string{"dance"}, 2, `unknown command "dance"`},
		{"an argument too many", nil, []string{"serve", "now"}, 2, "usage: keelson serve"},
		{"an unknown subcommand", nil, []string{"tokens", "frob"}, 2, "usage: keelson tokens"},
		{"an unknown flag", map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none"}, []string{"dlq", "replay", "q", "--lots"}, 2, "usage: keelson dlq"},
		{"an invalid configuration", map[string]string{"JOB_WORKERS": "many", "LOG_FORMAT": "json"}, []string{"tokens", "list"}, 1, "keelson tokens: invalid JOB_WORKERS"},
		{"an unreachable database", map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/keelson"}, []string{"tenants", "list"}, 1, "keelson tenants: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runKeelson(t, c.env, c.args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, c.code, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing: errors go to stderr", r.stdout)
			}
			if !strings.Contains(r.stderr, c.says) || strings.HasPrefix(strings.TrimSpace(r.stderr), "{") || strings.Contains(r.stderr, "level=") {
				t.Errorf("stderr %q, want plain text saying %q, not a log line", r.stderr, c.says)
			}
		})
	}
}
