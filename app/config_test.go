package main

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := LoadConfig(env(nil))
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if cfg.HTTPAddr != ":8080" || cfg.WebhooksClaimLease != 2*time.Minute || len(cfg.WebhooksRetrySchedule) != 7 {
		t.Fatalf("unexpected defaults: %+v", cfg)
	}
	if cfg.InstanceID == "" {
		t.Fatal("instance id must default to hostname:pid")
	}
}

func TestLoadConfigNamesTheInvalidVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"WEBHOOKS_CLAIM_LEASE":           {"WEBHOOKS_CLAIM_LEASE": "abc"},
		"WEBHOOKS_SEND_TIMEOUT":          {"WEBHOOKS_SEND_TIMEOUT": "-1s"},
		"WEBHOOKS_RETRY_SCHEDULE":        {"WEBHOOKS_RETRY_SCHEDULE": "5s,soon"},
		"WEBHOOKS_ALLOW_PRIVATE_TARGETS": {"WEBHOOKS_ALLOW_PRIVATE_TARGETS": "maybe"},
		"WEBHOOKS_ALLOWED_TARGETS":       {"WEBHOOKS_ALLOWED_TARGETS": "receiver:9000,receiver:0"},
		"DATABASE_URL":                   {"DATABASE_URL": "mysql://x"},
		"AMQP_URL":                       {"AMQP_URL": "not a url"},
		"LOG_LEVEL":                      {"LOG_LEVEL": "loud"},
		"LOG_FORMAT":                     {"LOG_FORMAT": "xml"},
		"JOB_WORKERS":                    {"JOB_WORKERS": "0"},
		"METRICS_PPROF":                  {"METRICS_PPROF": "true"}, // without METRICS_ADDR
	}
	for name, vars := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig(env(vars))
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("want an error naming %s, got %v", name, err)
			}
		})
	}
	_, err := LoadConfig(env(map[string]string{"WEBHOOKS_CLAIM_LEASE": "5s", "WEBHOOKS_SEND_TIMEOUT": "10s"}))
	if err == nil || !strings.Contains(err.Error(), "WEBHOOKS_CLAIM_LEASE") {
		t.Fatalf("a lease shorter than the send timeout must be refused, got %v", err)
	}
	_, err = LoadConfig(env(map[string]string{"WEBHOOKS_CLAIM_LEASE": "10400ms", "WEBHOOKS_SEND_TIMEOUT": "10s"}))
	if err == nil || !strings.Contains(err.Error(), "by at least 500ms") {
		t.Fatalf("a lease that cannot cover a take's write and its send must be refused, got %v", err)
	}
}

func TestConfigLogMasksSecrets(t *testing.T) {
	cfg, err := LoadConfig(env(map[string]string{
		"DATABASE_URL":      "postgres://app:db-secret@db:5432/keelson",
		"AMQP_URL":          "amqp://app:mq-secret@mq:5672/",
		"API_TOKENS":        "token-one,token-two",
		"ASSISTANT_API_KEY": "sk-secret",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", cfg)
	for _, secret := range []string{"db-secret", "mq-secret", "token-one", "token-two", "sk-secret"} {
		if strings.Contains(buf.String(), secret) {
			t.Fatalf("logged config leaks %q: %s", secret, buf.String())
		}
	}
	if !strings.Contains(buf.String(), "2 configured") {
		t.Fatalf("token count missing: %s", buf.String())
	}
}

func TestRunRejectsUnknownCommand(t *testing.T) {
	if err := run(context.Background(), []string{"dance"}, &bytes.Buffer{}); err == nil {
		t.Fatal("unknown command must fail")
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"env"}, &out); err != nil || !strings.Contains(out.String(), "WEBHOOKS_CLAIM_LEASE=2m") {
		t.Fatalf("env lists the variables: %v %s", err, out.String())
	}
}

// A variable set to nothing (NAME= in an env file, ${VAR:-} in compose) means its default.
func TestAnEmptyVariableMeansItsDefault(t *testing.T) {
	cfg, err := LoadConfig(env(map[string]string{"HTTP_ADDR": "", "JOB_WORKERS": "  ", "LOG_FORMAT": "", "SHUTDOWN_TIMEOUT": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != ":8080" || cfg.JobWorkers != 8 || cfg.LogFormat != "json" || cfg.ShutdownTimeout != 25*time.Second {
		t.Fatalf("empty variables did not take their defaults: %+v", cfg)
	}
	t.Setenv("HTTP_ADDR", "")
	t.Setenv("JOB_WORKERS", "")
	cfg, err = LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != ":8080" || cfg.JobWorkers != 8 {
		t.Fatalf("empty process variables did not take their defaults: %q %d", cfg.HTTPAddr, cfg.JobWorkers)
	}
}

// keelson env is an env file: comments on lines of their own, so no loader reads one as a value.
func TestEnvPrintsCommentsOnLinesOfTheirOwn(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"env"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "# ") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(value, "#\t \"'$") || strings.ToUpper(name) != name {
			t.Fatalf("line %q is neither a comment nor a plain NAME=value", line)
		}
	}
}

func TestInvalidEncryptionKeysStopTheStartWithTheVariablesName(t *testing.T) {
	_, err := LoadConfig(func(name string) string {
		if name == "KEELSON_ENCRYPTION_KEYS" {
			return "k1:c2hvcnQ="
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "KEELSON_ENCRYPTION_KEYS") || !strings.Contains(err.Error(), "32 bytes") {
		t.Fatalf("err = %v", err)
	}
}

var update = flag.Bool("update", false, "rewrite the generated table of docs/operations.md")

// The table of docs/operations.md is generated from Variables, so it cannot drift from them.
func TestTheOperationsTableIsTheDeclarations(t *testing.T) {
	const path = "../docs/operations.md"
	const begin, end = "<!-- variables: generated from app/config.go", "<!-- end of variables -->"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated variables table (%q … %q)", path, begin, end)
	}
	i += strings.Index(doc[i:], "\n") + 1
	var table bytes.Buffer
	printVariablesTable(&table)
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i]+table.String()+doc[j:]), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := doc[i:j]; got != table.String() {
		t.Errorf("%s's variables table differs from app/config.go's Variables; run go test ./app -run %s -update", path, t.Name())
	}
}

// Every declaration is complete, so each derived view has what it shows.
func TestEveryVariableIsDeclaredCompletely(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Variables {
		if seen[v.Name] {
			t.Errorf("%s is declared twice", v.Name)
		}
		seen[v.Name] = true
		if v.Doc == "" || v.set == nil || strings.Contains(v.Doc, "\n") || strings.Contains(v.Doc, "|") {
			t.Errorf("%s: a declaration needs a one-line Doc without '|' and a parser", v.Name)
		}
		var c Config
		if err := v.set(&c, v.Default); err != nil {
			t.Errorf("%s: its default %q does not parse: %v", v.Name, v.Default, err)
		}
	}
}
