//go:build compose

package compose

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const repoRoot = "../.."

// imageTag tags the app and receiver images this test binary builds (COMPOSE_IMAGE_TAG): its stacks
// share them, another run building other sources at the same time does not.
var imageTag = fmt.Sprintf("ct%d-%d", os.Getpid(), time.Now().Unix())

// The build stamp the images get, as `make` would pass it from git.
const (
	stampedVersion = "v0.0.0-compose"
	stampedCommit  = "0123456789abcdef0123456789abcdef01234567"
)

// TestMain removes the image tags of this run; --no-prune keeps the layers, the next run's build cache.
func TestMain(m *testing.M) {
	code := m.Run()
	_ = exec.Command("docker", "rmi", "--no-prune", "keelson:"+imageTag, "keelson-receiver:"+imageTag).Run()
	os.Exit(code)
}

// stack is one compose project: a copy of the repository (vendored, so the image build needs no
// network), the environment every compose command runs with, and the project's name.
type stack struct {
	t       *testing.T
	dir     string
	project string
	env     []string
	urls    map[string]string // replica → its API on the host port the stack published
	compose []string          // "docker compose" when the plugin exists, else Compose v1's docker-compose
}

// timingOverride shortens the waits a fault test would otherwise sit out (a dead replica's claims
// expire after WEBHOOKS_CLAIM_LEASE); compose reads docker-compose.override.yml next to the file.
const timingOverride = `x-timing: &timing
  WEBHOOKS_CLAIM_LEASE: 15s
  WEBHOOKS_SEND_TIMEOUT: 5s
  WEBHOOKS_SWEEP_INTERVAL: 1s
  WEBHOOKS_RETRY_SCHEDULE: 1s,2s,5s,10s,20s
services:
  app1: {environment: *timing}
  app2: {environment: *timing}
  app3: {environment: *timing}
`

// clusterHealthOverride gives the broker nodes a health check that boots no Erlang VM, a probe of the
// AMQP port, which a node opens once it booted (appended to timingOverride's services).
const clusterHealthOverride = `  rabbitmq: {healthcheck: &broker-health {test: ["CMD", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/5672"],
    interval: 5s, timeout: 10s, retries: 60, start_period: 3m}}
  rabbitmq2: {healthcheck: *broker-health}
  rabbitmq3: {healthcheck: *broker-health}
`

// appendOverride adds services' settings to the stack's docker-compose.override.yml.
func (s *stack) appendOverride(services string) {
	s.t.Helper()
	f, err := os.OpenFile(filepath.Join(s.dir, "docker-compose.override.yml"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(services)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		s.t.Fatal(err)
	}
}

// freePorts are n distinct loopback ports nothing listens on now (all held open until all are
// chosen), below the kernel's ephemeral range: there an outgoing connection of any process on the
// machine may take a port as its local one before Docker publishes on it.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	ephemeral := 32768
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if low, err := strconv.Atoi(strings.Fields(string(raw) + " x")[0]); err == nil && low > 12000 {
			ephemeral = low
		}
	}
	var ports []string
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free ports between 10000 and %d", n, ephemeral)
		}
		port := strconv.Itoa(10000 + rand.IntN(ephemeral-10000))
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			continue
		}
		defer l.Close()
		ports = append(ports, port)
	}
	return ports
}

func newStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{t: t, project: fmt.Sprintf("keelsonct%d", time.Now().UnixNano()%1_000_000_000)}
	// After a test that used up the time, the next starts nothing its cleanup could not remove.
	if left := s.within(time.Hour); left < 2*time.Minute {
		t.Fatalf("only %s left before the cleanup reserve of the -timeout: not starting a stack", left.Round(time.Second))
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		s.compose = []string{"docker", "compose"}
	} else {
		s.compose = []string{"docker-compose"}
	}
	began := time.Now()
	s.dir = buildContext(t)
	t.Logf("build context copied and vendored in %s", time.Since(began).Round(time.Second))
	if err := os.WriteFile(filepath.Join(s.dir, "docker-compose.override.yml"), []byte(timingOverride), 0o644); err != nil {
		t.Fatal(err)
	}
	s.env = append(os.Environ(), "COMPOSE_PROJECT_NAME="+s.project,
		"BUILD_GOFLAGS=-mod=vendor", "BUILD_GOPROXY=off", "COMPOSE_PROFILES=", "COMPOSE_IMAGE_TAG="+imageTag,
		"VERSION="+stampedVersion, "COMMIT="+stampedCommit, "BUILD_DATE=2026-01-02T03:04:05Z")
	// Free host ports, not the defaults: another stack, or a PostgreSQL on 5433, may hold those.
	ports := freePorts(t, 6)
	s.urls = map[string]string{}
	for i, replica := range []string{"app1", "app2", "app3"} {
		s.urls[replica] = "http://127.0.0.1:" + ports[i]
		s.env = append(s.env, "COMPOSE_"+strings.ToUpper(replica)+"_PORT="+ports[i])
	}
	s.env = append(s.env, "COMPOSE_RECEIVER_PORT="+ports[3], "COMPOSE_POSTGRES_PORT="+ports[4],
		"COMPOSE_RABBITMQ_MANAGEMENT_PORT="+ports[5])
	if os.Getenv("KEELSON_COMPOSE_UPSTREAM_IMAGES") == "" { // no registry: local stand-ins
		vars := standins(t)
		for i, v := range vars {
			if goImage, ok := strings.CutPrefix(v, "GO_IMAGE="); ok {
				vars[i] = "GO_IMAGE=" + warmGoImage(t, s.dir, goImage)
			}
		}
		s.env = append(s.env, vars...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := s.run(45*time.Second, s.cmd("--profile", "scale", "--profile", "cluster", "--profile", "pgbouncer", "logs", "--no-color", "--tail", "60")...)
			t.Logf("compose logs:\n%s", out)
		}
		if out, err := s.run(2*time.Minute, s.cmd("--profile", "scale", "--profile", "cluster", "--profile", "pgbouncer", "down", "-v", "--remove-orphans", "-t", "5")...); err != nil {
			t.Logf("down -v: %v\n%s", err, out)
		}
	})
	return s
}

// buildContext copies the tracked and untracked-but-not-ignored files of the repository and vendors
// the modules from the local module cache.
func buildContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var list []string
	for _, f := range strings.Split(string(files), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(repoRoot, f)); err == nil { // deleted but not yet staged
			list = append(list, f)
		}
	}
	tarc := exec.Command("tar", "-C", repoRoot, "-cf", "-", "--null", "-T", "-")
	tarc.Stdin = strings.NewReader(strings.Join(list, "\x00"))
	untar := exec.Command("tar", "-C", dir, "-xf", "-")
	pipe, err := tarc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var tarErr bytes.Buffer
	tarc.Stderr = &tarErr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := tarc.Run(); err != nil {
		t.Fatalf("tar: %v %s", err, tarErr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("untar: %v", err)
	}
	vendor := exec.Command("go", "mod", "vendor")
	vendor.Dir = dir
	if out, err := vendor.CombinedOutput(); err != nil {
		t.Fatalf("go mod vendor: %v\n%s", err, out)
	}
	return dir
}

// standins builds (or reuses) the stand-in images and returns the variables pointing compose at them.
func standins(t *testing.T) []string {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("bash", filepath.Join(repoRoot, "scripts", "standins", "build.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/standins/build.sh: %v\n%s", err, stderr.String())
	}
	t.Logf("stand-in images ready in %s", time.Since(start).Round(time.Second))
	var vars []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "=") {
			vars = append(vars, sc.Text())
		}
	}
	if len(vars) != 5 {
		t.Fatalf("scripts/standins/build.sh printed %q", out)
	}
	return vars
}

// standinCache is where scripts/standins/build.sh keeps its tarballs; the Go build cache of the
// image build lives next to them.
func standinCache() string {
	if dir := os.Getenv("KEELSON_STANDIN_CACHE"); dir != "" {
		return dir
	}
	return "/var/tmp/keelson-standins-cache"
}

// warmGoImage returns an image of the Go stand-in that carries a warm build cache, building it
// when this machine has none: both binaries are built here the way the Dockerfile's build stage
// builds them (same toolchain, vendored sources, -trimpath, so the same cache keys) into a cache kept
// next to the stand-in tarballs, which the image then holds. The image build compiles only what
// changed since instead of every dependency — on two busy cores the difference between one minute
// and twenty. Test-only, like the stand-ins; every stack of a run shares it, and with it the image
// layers built on it.
func warmGoImage(t *testing.T, context, goImage string) string {
	t.Helper()
	_, tag, _ := strings.Cut(goImage, ":")
	warm := "keelson-standin/go-warm:" + tag
	if exec.Command("docker", "image", "inspect", warm).Run() == nil {
		return warm
	}
	began := time.Now()
	gocache := filepath.Join(standinCache(), "gocache")
	// Two packages at once: compiled into the cache, not linked (a link is never cached).
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "./app", "./examples/receiver")
	build.Dir = context
	build.Env = append(os.Environ(), "GOCACHE="+gocache, "GOFLAGS=-mod=vendor", "GOPROXY=off",
		"GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build for the build cache: %v\n%s", err, out)
	}
	t.Logf("Go build cache warmed on the host in %s", time.Since(began).Round(time.Second))
	began = time.Now()
	bake := exec.Command("docker", "build", "-q", "-t", warm, "--build-arg", "GO_IMAGE="+goImage, "-f", "-", gocache)
	bake.Stdin = strings.NewReader("ARG GO_IMAGE\nFROM ${GO_IMAGE}\nENV GOCACHE=/root/.cache/go-build\nCOPY . /root/.cache/go-build\n")
	if out, err := bake.CombinedOutput(); err != nil {
		t.Fatalf("docker build %s: %v\n%s", warm, err, out)
	}
	t.Logf("Go stand-in with the build cache (%s) in %s", warm, time.Since(began).Round(time.Second))
	return warm
}

// cleanupReserve is what a test leaves of the go test -timeout for its cleanup (logs, down -v).
const cleanupReserve = 3 * time.Minute

// within caps a step's timeout at what is left before the reserve: a step that overruns fails the
// test while there is still time to remove its containers, rather than the binary's panic leaving them.
func (s *stack) within(d time.Duration) time.Duration {
	if deadline, ok := s.t.Deadline(); ok {
		if left := time.Until(deadline) - cleanupReserve; left < d {
			return max(left, time.Second)
		}
	}
	return d
}

func (s *stack) cmd(args ...string) []string {
	return append(append([]string(nil), s.compose...), args...)
}

// run runs a command in the build context with the stack's environment.
func (s *stack) run(timeout time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Env = s.env
	// A killed shell's children (compose, curl) may hold its output open: stop waiting for them.
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs a command and fails the test when it fails.
func (s *stack) must(timeout time.Duration, argv ...string) string {
	s.t.Helper()
	out, err := s.run(s.within(timeout), argv...)
	if err != nil {
		s.t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return out
}

// containers lists the project's containers of a service, running or not, by compose's labels
// (Compose v1 and v2 name containers differently, both label them).
func (s *stack) containers(service string) []string {
	s.t.Helper()
	out := s.must(time.Minute, "docker", "ps", "-a", "-q", "--no-trunc",
		"--filter", "label=com.docker.compose.project="+s.project,
		"--filter", "label=com.docker.compose.service="+service)
	return strings.Fields(out)
}

// container is the one container of a service.
func (s *stack) container(service string) string {
	s.t.Helper()
	ids := s.containers(service)
	if len(ids) != 1 {
		s.t.Fatalf("service %s has %d containers, want 1", service, len(ids))
	}
	return ids[0]
}

func (s *stack) inspect(id, format string) string {
	s.t.Helper()
	return strings.TrimSpace(s.must(time.Minute, "docker", "inspect", "-f", format, id))
}

// waitHealthy waits until every listed service's container reports healthy.
func (s *stack) waitHealthy(timeout time.Duration, services ...string) time.Duration {
	s.t.Helper()
	start := time.Now()
	timeout = s.within(timeout)
	for _, svc := range services {
		for {
			ids := s.containers(svc)
			if len(ids) == 1 && s.inspect(ids[0], "{{if .State.Health}}{{.State.Health.Status}}{{end}}") == "healthy" {
				break
			}
			if time.Since(start) > timeout {
				state := "no container"
				if len(ids) == 1 {
					state = s.inspect(ids[0], "{{.State.Status}} {{json .State.Health}}")
				}
				s.t.Fatalf("%s not healthy after %s: %s", svc, timeout, state)
			}
			time.Sleep(time.Second)
		}
	}
	return time.Since(start)
}

// network is the project's default network.
func (s *stack) network() string {
	s.t.Helper()
	out := strings.Fields(s.must(time.Minute, "docker", "network", "ls", "-q", "--filter", "label=com.docker.compose.project="+s.project))
	if len(out) != 1 {
		s.t.Fatalf("project %s has networks %v, want one", s.project, out)
	}
	return s.inspect(out[0], "{{.Name}}")
}

// leftovers lists what of the project still exists: containers, networks, volumes.
func (s *stack) leftovers() []string {
	s.t.Helper()
	var left []string
	label := "label=com.docker.compose.project=" + s.project
	for _, kind := range [][]string{{"ps", "-a", "-q"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		argv := append(append([]string{"docker"}, kind...), "--filter", label)
		for _, id := range strings.Fields(s.must(time.Minute, argv...)) {
			left = append(left, kind[0]+" "+id)
		}
	}
	return left
}

// waitClusterOf waits until the first broker node reports n running nodes. It asks the management
// API rather than rabbitmqctl: each CLI call boots an Erlang VM, which takes minutes on a busy machine.
func (s *stack) waitClusterOf(n int, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(s.within(timeout))
	for {
		var nodes []struct {
			Name    string `json:"name"`
			Running bool   `json:"running"`
		}
		err := s.brokerAPI("rabbitmq", "/api/nodes?columns=name,running", &nodes)
		running := 0
		for _, node := range nodes {
			if node.Running {
				running++
			}
		}
		if err == nil && running == n {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the cluster has not %d running nodes after %s: %v %+v", n, timeout, err, nodes)
		}
		time.Sleep(2 * time.Second)
	}
}

// brokerAPI GETs path from the management API of a broker node, at its address on the project's
// network (the node need not publish a port), and decodes the JSON answer into v.
func (s *stack) brokerAPI(service, path string, v any) error {
	s.t.Helper()
	ip := s.inspect(s.container(service), "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
	req, err := http.NewRequest(http.MethodGet, "http://"+ip+":15672"+path, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth("keelson", "keelson")
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on %s: %s", path, service, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// waitQuorumQueues waits until the replicas declared the delivery queue and every queue of the vhost
// is a quorum queue with members on n nodes: a queue declared before all nodes joined would lose its
// majority with one node stopped, and the fault would then test nothing but that.
func (s *stack) waitQuorumQueues(n int, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(s.within(timeout))
	for {
		var queues []struct {
			Name, Type string
			Members    []string `json:"members"`
		}
		err := s.brokerAPI("rabbitmq", "/api/queues/%2F", &queues)
		var problems []string
		delivery := false
		for _, q := range queues {
			delivery = delivery || strings.Contains(q.Name, "webhooks.delivery")
			if q.Type != "quorum" || len(q.Members) != n {
				problems = append(problems, fmt.Sprintf("%s is %s on %v", q.Name, q.Type, q.Members))
			}
		}
		if err == nil && delivery && len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("want the delivery queue and only quorum queues on %d nodes after %s: %v, delivery queue %t, %v",
				n, timeout, err, delivery, problems)
		}
		time.Sleep(2 * time.Second)
	}
}
