// Command keelson runs the Keelson modular monolith: `migrate` applies the schema, `serve` runs the
// HTTP API, consumers, outbox relay, job workers and schedules in one process; the other commands
// administer tokens, tenants, dead letters and stored secrets (`keelson --help`).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/keelson/keelson/platform/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	os.Exit(report(err, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// Exit codes (README, docs/operations.md): 0 done, 1 the command failed, 2 it was called wrongly.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	helpPointer = "run `keelson --help` for the commands, `keelson COMMAND --help` for one"
)

// report says why the command failed and returns the exit code. A person reads the errors of the
// commands they run on stderr as plain text; serve and migrate run under a supervisor whose log
// pipeline parses every line, so their errors are one log line in LOG_FORMAT, like the rest of it.
func report(err error, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "keelson: %v\n%s\n", err, helpPointer)
		return exitUsage
	case errors.Is(err, errUnhealthy): // healthcheck printed why
		return exitFailed
	case args[0] == "serve" || args[0] == "migrate":
		fatalLogger(getenv, stdout).Error("keelson stopped", "error", err.Error())
		return exitFailed
	default:
		fmt.Fprintf(stderr, "keelson %s: %v\n", args[0], err)
		return exitFailed
	}
}

// errUsage marks a command called wrongly: an unknown command, a missing argument, a bad flag.
var errUsage = errors.New("usage")

// usageError says how a command was called wrongly; it is errUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// command is one subcommand as `keelson --help` and `keelson COMMAND --help` describe it.
type command struct {
	name        string
	usage       string // the arguments after the name
	summary     string
	subcommands []string // the first argument must be one of these, when there are any
}

var commands = []command{
	{"serve", "", "run one replica: the HTTP API, consumers, the outbox relay, job workers and schedules", nil},
	{"migrate", "", "create the database if it is missing and apply every migration", nil},
	{"env", "", "print every configuration variable with its default and meaning, as an env file", nil},
	{"healthcheck", "", "exit 0 if the replica on HTTP_ADDR is ready (/readyz), 1 if not: the image's HEALTHCHECK", nil},
	{"version", "", "print the version, commit and build date stamped into this binary", nil},
	{"tokens", "create --tenant T --scope S [--scope S ...] [--name N] [--expires 30d] | list [--tenant T] | revoke ID",
		"create, list and revoke API tokens; create prints the token once", []string{"create", "list", "revoke"}},
	{"tenants", "create NAME | list | disable T | enable T", "manage tenants; a disabled tenant's tokens get 403",
		[]string{"create", "list", "disable", "enable"}},
	{"portal-link", "create --tenant T [--name N] [--event-type P ...] [--read-only] [--once] [--expires 24h] | revoke ID",
		"mint a signed, expiring customer portal link for one tenant (printed once), or revoke one and end its sessions", []string{"create", "revoke"}},
	{"dlq", "list | replay QUEUE [--limit N]", "list dead-lettered messages per consumer; move them back to the consumer's queue",
		[]string{"list", "replay"}},
	{"secrets", "reencrypt [--batch N]", "seal stored secrets under the first key of KEELSON_ENCRYPTION_KEYS", []string{"reencrypt"}},
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" }

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "keelson runs the Keelson modular monolith and administers its database and broker.")
	fmt.Fprintln(w, "\nUsage: keelson COMMAND [ARGUMENTS]\n\nCommands:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nConfiguration comes from the environment: `keelson env` lists every variable.")
	fmt.Fprintln(w, "Exit codes: 0 done, 1 the command failed, 2 it was called wrongly (usage).")
}

func (c command) printHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: keelson %s\n\n%s.\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
}

func (c command) usageError(detail string) error {
	return usagef("%s\nusage: keelson %s", detail, strings.TrimSpace(c.name+" "+c.usage))
}

func printVersion(w io.Writer) {
	b := telemetry.ReadBuild()
	modified := ""
	if b.Modified {
		modified = " (modified)"
	}
	fmt.Fprintf(w, "keelson %s\ncommit: %s%s\nbuilt:  %s\ngo:     %s\n", b.Version, b.Commit, modified, b.Date, b.GoVersion)
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("a command is required")
	}
	if isHelp(args[0]) || args[0] == "help" {
		if len(args) > 1 {
			if c, ok := lookup(args[1]); ok {
				c.printHelp(stdout)
				return nil
			}
			return usagef("unknown command %q", args[1])
		}
		printUsage(stdout)
		return nil
	}
	if args[0] == "--version" {
		args[0] = "version"
	}
	cmd, ok := lookup(args[0])
	if !ok {
		return usagef("unknown command %q", args[0])
	}
	if slices.ContainsFunc(args[1:], isHelp) {
		cmd.printHelp(stdout)
		return nil
	}
	if cmd.usage == "" && len(args) != 1 {
		return cmd.usageError("no arguments expected")
	}
	if len(cmd.subcommands) > 0 && (len(args) < 2 || !slices.Contains(cmd.subcommands, args[1])) {
		return cmd.usageError("a subcommand is required: one of " + strings.Join(cmd.subcommands, ", "))
	}
	switch cmd.name {
	case "env":
		printVariables(stdout)
		return nil
	case "version":
		printVersion(stdout)
		return nil
	case "healthcheck":
		// Only HTTP_ADDR matters: a probe must not fail on configuration the replica never needed to reload.
		addr := strings.TrimSpace(os.Getenv("HTTP_ADDR"))
		if addr == "" {
			addr = defaultOf("HTTP_ADDR")
		}
		return healthcheck(ctx, addr, stdout)
	}
	cfg, err := LoadConfig(nil)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stdout)
	var usage error
	switch cmd.name {
	case "dlq":
		err, usage = dlq(ctx, cfg, logger, args[1:], stdout), errDLQUsage
	case "secrets":
		err, usage = secretsCommand(ctx, cfg, logger, args[1:], stdout), errSecretsUsage
	case "tokens":
		err, usage = tokens(ctx, cfg, args[1:], stdout), errTokensUsage
	case "tenants":
		err, usage = tenants(ctx, cfg, args[1:], stdout), errTenantsUsage
	case "portal-link":
		err, usage = portalLink(ctx, cfg, args[1:], stdout), errPortalLinkUsage
	case "migrate":
		return migrate(ctx, cfg, logger)
	default:
		return serve(ctx, cfg, logger)
	}
	if errors.Is(err, usage) {
		return cmd.usageError("wrong arguments")
	}
	return err
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	return telemetry.NewLogger(w, cfg.LogFormat, cfg.LogLevel)
}

// fatalLogger writes in LOG_FORMAT even when the configuration itself is what failed.
func fatalLogger(getenv func(string) string, w io.Writer) *slog.Logger {
	format := "json"
	if strings.TrimSpace(getenv("LOG_FORMAT")) == "text" {
		format = "text"
	}
	return telemetry.NewLogger(w, format, slog.LevelInfo)
}
