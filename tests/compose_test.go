package tests

import (
	"bufio"
	"bytes"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	// Extensions are the x- blocks the services merge from.
	Extensions map[string]any `yaml:",inline"`
}

type composeService struct {
	Image       string                      `yaml:"image"`
	Build       *composeBuild               `yaml:"build"`
	Command     []string                    `yaml:"command"`
	Entrypoint  []string                    `yaml:"entrypoint"`
	Environment map[string]string           `yaml:"environment"`
	Ports       []string                    `yaml:"ports"`
	DependsOn   map[string]composeDependsOn `yaml:"depends_on"`
	Healthcheck *composeHealthcheck         `yaml:"healthcheck"`
	Volumes     []string                    `yaml:"volumes"`
	Restart     string                      `yaml:"restart"`
	StopGrace   string                      `yaml:"stop_grace_period"`
	Profiles    []string                    `yaml:"profiles"`
	Hostname    string                      `yaml:"hostname"`
}

type composeBuild struct {
	Context string            `yaml:"context"`
	Target  string            `yaml:"target"`
	Args    map[string]string `yaml:"args"`
}

type composeDependsOn struct {
	Condition string `yaml:"condition"`
}

type composeHealthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	StartPeriod string   `yaml:"start_period"`
	Retries     int      `yaml:"retries"`
	Disable     bool     `yaml:"disable"`
}

// composeDefault is the value of "${VAR:-default}" when VAR is unset, or s itself.
func composeDefault(s string) string {
	if m := regexp.MustCompile(`^\$\{[A-Z0-9_]+:-(.*)\}$`).FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return s
}

// publishedPort splits "host-ip:host-port:container-port"; a host port "${VAR:-default}" is its default.
func publishedPort(p string) (hostIP, hostPort, containerPort string) {
	m := regexp.MustCompile(`^([^:]+):(\$\{[A-Z0-9_]+:-[0-9]+\}|[0-9]+):([0-9]+)$`).FindStringSubmatch(p)
	if m == nil {
		return "", "", ""
	}
	return m[1], composeDefault(m[2]), m[3]
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true) // a misspelt key would be ignored by docker compose: refuse it here
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for key := range c.Extensions {
		if !strings.HasPrefix(key, "x-") {
			t.Fatalf("docker-compose.yml: unknown top-level key %q", key)
		}
	}
	return c
}

// appVariables lists the variables the binary reads, from `keelson env`.
func appVariables(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(keelson(t), "env").Output()
	if err != nil {
		t.Fatalf("keelson env: %v", err)
	}
	vars := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if name, _, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(name, "#") {
			vars[name] = true
		}
	}
	if len(vars) < 10 {
		t.Fatalf("keelson env listed %d variables:\n%s", len(vars), out)
	}
	return vars
}

// receiverVariables lists the variables the demo receiver reads (its getenv calls).
func receiverVariables(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", "receiver", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`getenv\("([A-Z0-9_]+)"\)`).FindAllStringSubmatch(string(raw), -1) {
		vars[m[1]] = true
	}
	return vars
}

func TestComposeServicesAndDependencies(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"postgres", "rabbitmq", "migrate", "app1", "app2", "receiver"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("no %q service", name)
		}
	}

	// Images are variables (a machine without a registry builds stand-ins) whose defaults are
	// upstream images pinned to a patch version.
	pinned := regexp.MustCompile(`:[0-9]+\.[0-9]+\.[0-9]+`)
	pg := c.Services["postgres"]
	if img := composeDefault(pg.Image); !strings.HasPrefix(img, "postgres:16.") || !pinned.MatchString(img+".0") || img == pg.Image {
		t.Errorf("postgres image %q, want ${POSTGRES_IMAGE:-postgres:16.x}", pg.Image)
	}
	mq := c.Services["rabbitmq"]
	if img := composeDefault(mq.Image); !strings.HasPrefix(img, "rabbitmq:3.") || !pinned.MatchString(img) ||
		!strings.HasSuffix(img, "-management") || img == mq.Image {
		t.Errorf("rabbitmq image %q, want ${RABBITMQ_IMAGE:-rabbitmq:3.x.y-management}", mq.Image)
	}
	for name, s := range c.Services {
		if s.Build == nil {
			continue
		}
		if goImage := composeDefault(s.Build.Args["GO_IMAGE"]); !strings.HasPrefix(goImage, "golang:1.26.") || !pinned.MatchString(goImage) {
			t.Errorf("%s builds on GO_IMAGE %q, want ${GO_IMAGE:-golang:1.26.x…}", name, s.Build.Args["GO_IMAGE"])
		}
		if rt := composeDefault(s.Build.Args["RUNTIME_IMAGE"]); !strings.HasPrefix(rt, "gcr.io/distroless/static") {
			t.Errorf("%s runs on RUNTIME_IMAGE %q, want ${RUNTIME_IMAGE:-gcr.io/distroless/static…}", name, s.Build.Args["RUNTIME_IMAGE"])
		}
	}
	// Published ports answer on loopback only: the demo credentials must not reach the network.
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if ip, _, _ := publishedPort(p); ip != "127.0.0.1" {
				t.Errorf("%s publishes %q, want 127.0.0.1:host:container", name, p)
			}
		}
	}
	for _, name := range []string{"postgres", "rabbitmq", "rabbitmq2", "rabbitmq3"} {
		s := c.Services[name]
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Retries == 0 {
			t.Errorf("%s needs a health check with a test command and retries", name)
		}
		if len(s.Volumes) == 0 {
			t.Errorf("%s needs a volume", name)
		}
		for _, v := range s.Volumes {
			volume, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(volume, "./") { // a file of the repository, bind-mounted
				if _, err := os.Stat(filepath.Join(repoRoot, volume)); err != nil {
					t.Errorf("%s mounts %s: %v", name, volume, err)
				}
				continue
			}
			if _, declared := c.Volumes[volume]; !declared {
				t.Errorf("%s mounts volume %q, not declared under volumes:", name, volume)
			}
		}
	}

	migrate := c.Services["migrate"]
	if !slices.Equal(migrate.Command, []string{"migrate"}) || migrate.Restart != "no" {
		t.Errorf("migrate must run `migrate` once: command %v restart %q", migrate.Command, migrate.Restart)
	}
	if migrate.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("migrate must wait for a healthy postgres: %v", migrate.DependsOn)
	}

	wantDeps := map[string]string{
		"migrate":  "service_completed_successfully",
		"postgres": "service_healthy",
		"rabbitmq": "service_healthy",
	}
	hostPorts := map[string]string{}
	for _, name := range []string{"app1", "app2", "app3"} {
		s := c.Services[name]
		if s.Healthcheck == nil || !slices.Equal(s.Healthcheck.Test, []string{"CMD", "/usr/local/bin/keelson", "healthcheck"}) {
			t.Errorf("%s must be checked by `keelson healthcheck` (no shell in the image), got %+v", name, s.Healthcheck)
		}
		for dep, cond := range wantDeps {
			if got := s.DependsOn[dep].Condition; got != cond {
				t.Errorf("%s depends on %s with condition %q, want %q", name, dep, got, cond)
			}
		}
		if grace, err := time.ParseDuration(s.StopGrace); err != nil || grace < 30*time.Second {
			t.Errorf("%s stop_grace_period %q: a graceful stop takes up to 30 s, Docker kills after 10 s by default", name, s.StopGrace)
		}
		if !slices.Equal(s.Command, []string{"serve"}) {
			t.Errorf("%s command %v, want [serve]", name, s.Command)
		}
		if s.Image != migrate.Image || s.Build == nil || s.Build.Target != "app" {
			t.Errorf("%s must run the image migrate runs (%q, target app), got %q %+v", name, migrate.Image, s.Image, s.Build)
		}
		_, containerPort, err := net.SplitHostPort(s.Environment["HTTP_ADDR"])
		if err != nil {
			t.Fatalf("%s HTTP_ADDR %q: %v", name, s.Environment["HTTP_ADDR"], err)
		}
		if len(s.Ports) != 1 {
			t.Fatalf("%s publishes %v, want one port", name, s.Ports)
		}
		_, host, container := publishedPort(s.Ports[0])
		if container != containerPort {
			t.Errorf("%s publishes container port %s but listens on %s", name, container, containerPort)
		}
		hostPorts[name] = host
	}
	if hostPorts["app1"] != "8081" || hostPorts["app2"] != "8082" || hostPorts["app3"] != "8083" {
		t.Errorf("replicas on host ports %v, want app1 8081, app2 8082, app3 8083", hostPorts)
	}
	for _, node := range []string{"rabbitmq2", "rabbitmq3"} {
		n := c.Services[node]
		if !slices.Equal(n.Profiles, []string{"cluster"}) || n.Hostname != node || n.Image != mq.Image ||
			n.Environment["RABBITMQ_ERLANG_COOKIE"] == "" || n.Environment["RABBITMQ_ERLANG_COOKIE"] != mq.Environment["RABBITMQ_ERLANG_COOKIE"] {
			t.Errorf("%s must be a node of the cluster profile sharing rabbitmq's image and Erlang cookie: %+v", node, n)
		}
	}
	if p := c.Services["app3"].Profiles; !slices.Equal(p, []string{"scale"}) || len(c.Services["app1"].Profiles) > 0 {
		t.Errorf("app3 is the on-demand third replica (profile scale), app1 and app2 always run: %v", p)
	}

	a1, a2 := c.Services["app1"].Environment, c.Services["app2"].Environment
	for _, shared := range []string{"DATABASE_URL", "AMQP_URL", "API_TOKENS"} {
		if a1[shared] == "" || a1[shared] != a2[shared] {
			t.Errorf("replicas must share %s: %q vs %q", shared, a1[shared], a2[shared])
		}
	}
	if a3 := c.Services["app3"].Environment; a3["DATABASE_URL"] != a1["DATABASE_URL"] || a3["INSTANCE_ID"] == a1["INSTANCE_ID"] || a3["INSTANCE_ID"] == a2["INSTANCE_ID"] {
		t.Errorf("app3 must share the database under its own INSTANCE_ID: %v", a3)
	}
	if a1["INSTANCE_ID"] == a2["INSTANCE_ID"] {
		t.Errorf("replicas need distinct INSTANCE_ID, both %q", a1["INSTANCE_ID"])
	}
	if migrate.Environment["DATABASE_URL"] != a1["DATABASE_URL"] {
		t.Errorf("migrate and the replicas must use one database")
	}
	for _, env := range []map[string]string{a1, a2} {
		if env["WEBHOOKS_ALLOWED_TARGETS"] != "receiver:9000" || env["WEBHOOKS_ALLOW_PRIVATE_TARGETS"] != "" {
			t.Errorf("the demo receiver must be reached through WEBHOOKS_ALLOWED_TARGETS=receiver:9000, the guard left on: %v", env)
		}
	}

	db, err := url.Parse(composeDefault(a1["DATABASE_URL"]))
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := db.User.Password()
	if db.Hostname() != "postgres" || db.User.Username() != pg.Environment["POSTGRES_USER"] ||
		pass != pg.Environment["POSTGRES_PASSWORD"] || strings.TrimPrefix(db.Path, "/") != pg.Environment["POSTGRES_DB"] {
		t.Errorf("DATABASE_URL %s does not match the postgres service %v", db.Redacted(), pg.Environment)
	}
	mqURL, err := url.Parse(composeDefault(a1["AMQP_URL"]))
	if err != nil {
		t.Fatal(err)
	}
	mqPass, _ := mqURL.User.Password()
	if mqURL.Hostname() != "rabbitmq" || mqURL.User.Username() != mq.Environment["RABBITMQ_DEFAULT_USER"] ||
		mqPass != mq.Environment["RABBITMQ_DEFAULT_PASS"] {
		t.Errorf("AMQP_URL %s does not match the rabbitmq service", mqURL.Redacted())
	}

	rcv := c.Services["receiver"]
	if rcv.Build == nil || rcv.Build.Target != "receiver" {
		t.Errorf("receiver must be built from the Dockerfile's receiver target, got %+v", rcv.Build)
	}
	if rcv.Healthcheck == nil || !slices.Equal(rcv.Healthcheck.Test, []string{"CMD", "/usr/local/bin/receiver", "healthcheck"}) {
		t.Errorf("receiver must be checked by `receiver healthcheck`, got %+v", rcv.Healthcheck)
	}
	_, rcvPort, _ := net.SplitHostPort(rcv.Environment["RECEIVER_ADDR"])
	if len(rcv.Ports) != 1 || !strings.HasSuffix(rcv.Ports[0], ":"+rcvPort) {
		t.Errorf("receiver listens on %q, publishes %v", rcv.Environment["RECEIVER_ADDR"], rcv.Ports)
	}
	if rcv.Environment["RECEIVER_SECRETS"] == "" {
		t.Errorf("receiver needs RECEIVER_SECRETS to verify signatures")
	}
}

func TestComposeUsesOnlyVariablesTheProgramsRead(t *testing.T) {
	c := loadCompose(t)
	app := appVariables(t)
	receiver := receiverVariables(t)
	for name, s := range c.Services {
		var known map[string]bool
		switch {
		case s.Build != nil && s.Build.Target == "app":
			known = app
		case s.Build != nil && s.Build.Target == "receiver":
			known = receiver
		default:
			continue // third-party images document their own variables
		}
		if len(s.Environment) == 0 {
			t.Errorf("%s sets no environment", name)
		}
		for v := range s.Environment {
			if !known[v] {
				t.Errorf("service %s sets %s, which the program does not read", name, v)
			}
		}
	}
}
