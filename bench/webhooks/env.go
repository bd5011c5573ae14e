package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

const token = "bench-token"

// environment is the database, the broker names, the receiver and the running replicas.
type environment struct {
	dbURL    string
	dropDB   func()
	prefix   string
	amqpURL  string
	receiver *receiver
	procs    []*exec.Cmd
	apis     []string
	profiles string // replica 0's metrics listener, which serves /debug/pprof
	logDir   string
	client   *http.Client
	extraEnv []string // WEBHOOKS_SEND_TIMEOUT when -send-timeout is given, the subscription quota when -stalled needs more

	latencySubscribed bool // the latency run's subscription exists (and has received)
}

func binary(ctx context.Context, path string) (string, func(), error) {
	if path != "" {
		return path, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "keelson-bench")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "keelson")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./app").CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build ./app: %w: %s", err, out)
	}
	return bin, func() { _ = os.RemoveAll(dir) }, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newEnvironment(ctx context.Context, o options, bin string) (*environment, error) {
	dbURL, drop, err := benchenv.Throwaway(ctx, o.adminURL, "keelson_bench_webhooks")
	if err != nil {
		return nil, err
	}
	logDir, _ := os.MkdirTemp("", "keelson-bench-logs")
	e := &environment{dbURL: dbURL, dropDB: drop, prefix: "bench.webhooks." + randomHex(4), amqpURL: o.amqpURL, logDir: logDir,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	if o.sendTimeout > 0 {
		e.extraEnv = append(e.extraEnv, "WEBHOOKS_SEND_TIMEOUT="+o.sendTimeout.String())
	}
	if need := o.fanout + 1 + o.stalled + fairnessDead(o); need > 100 {
		// The default quota (100 live subscriptions per tenant) would refuse the fairness run's endpoints.
		e.extraEnv = append(e.extraEnv, "WEBHOOKS_MAX_SUBSCRIPTIONS_PER_TENANT="+strconv.Itoa(need))
	}
	e.receiver, err = newReceiver(ctx)
	if err != nil {
		e.close()
		return nil, err
	}
	migrate := exec.CommandContext(ctx, bin, "migrate")
	migrate.Env = e.env(0, "")
	if out, err := migrate.CombinedOutput(); err != nil {
		e.close()
		return nil, fmt.Errorf("migrate: %w: %s", err, out)
	}
	for i := range o.replicas {
		port, err := freePort(ctx)
		if err != nil {
			e.close()
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.CommandContext(ctx, bin, "serve") // stopped by SIGTERM in close
		cmd.Env = e.env(i, addr)
		if i == 0 {
			// Profiles for -profile; a binary that predates METRICS_PPROF answers 404 and is sampled with perf.
			mport, err := freePort(ctx)
			if err != nil {
				e.close()
				return nil, err
			}
			maddr := "127.0.0.1:" + strconv.Itoa(mport)
			cmd.Env = append(cmd.Env, "METRICS_ADDR="+maddr, "METRICS_PPROF=true")
			e.profiles = "http://" + maddr
		}
		logFile, _ := os.Create(filepath.Clean(filepath.Join(logDir, fmt.Sprintf("replica-%d.log", i))))
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			e.close()
			return nil, err
		}
		e.procs = append(e.procs, cmd)
		e.apis = append(e.apis, "http://"+addr)
	}
	for _, api := range e.apis {
		if err := waitOK(ctx, api+"/readyz", time.Minute); err != nil {
			e.close()
			return nil, fmt.Errorf("%s: %w (logs in %s)", api, err, logDir)
		}
	}
	return e, nil
}

func (e *environment) env(i int, addr string) []string {
	return append(append(os.Environ(),
		"DATABASE_URL="+e.dbURL,
		"AMQP_URL="+e.amqpURL,
		"AMQP_EXCHANGE="+e.prefix,
		"AMQP_QUEUE_PREFIX="+e.prefix,
		"HTTP_ADDR="+addr,
		"API_TOKENS="+token,
		"INSTANCE_ID=bench-"+strconv.Itoa(i),
		"WEBHOOKS_ALLOW_PRIVATE_TARGETS=true",
		"LOG_LEVEL=error",
		"LOG_FORMAT=text",
	), e.extraEnv...)
}

// close stops the replicas (SIGTERM, as in a deployment), deletes the broker names and drops the database.
func (e *environment) close() {
	for _, p := range e.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range e.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(35 * time.Second):
			_ = p.Process.Kill()
		}
	}
	if e.receiver != nil {
		e.receiver.close()
	}
	deleteTopology(e.amqpURL, e.prefix)
	if e.dropDB != nil {
		e.dropDB()
	}
	e.removeQuietLogs()
}

// removeQuietLogs deletes the replicas' log directory when they logged nothing (LOG_LEVEL=error), and
// otherwise says where it is.
func (e *environment) removeQuietLogs() {
	if e.logDir == "" {
		return
	}
	logs, _ := os.ReadDir(e.logDir)
	for _, l := range logs {
		if info, err := l.Info(); err == nil && info.Size() > 0 {
			fmt.Fprintf(os.Stderr, "the replicas logged errors: %s\n", e.logDir)
			return
		}
	}
	_ = os.RemoveAll(e.logDir)
}

// deleteTopology removes the exchange and the queues of every consumer the app declares.
func deleteTopology(amqpURL, prefix string) {
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	defer ch.Close()
	consumers := []string{"webhooks.fanout", "webhooks.delivery", "webhooks.proposals", "webhooks.tenant_enabled",
		"conversations.proposals", "proposals.intake", "proposals.results"}
	for _, c := range consumers {
		_, _ = ch.QueueDelete(prefix+"."+c, false, false, false)
		_, _ = ch.QueueDelete(prefix+"."+c+".dead", false, false, false)
	}
	_ = ch.ExchangeDelete(prefix, false, false)
}

func freePort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitOK polls url until it answers 200, for at most within.
func waitOK(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: no 200 within %s", url, within)
}

// post sends an authenticated JSON request to one replica's webhooks API.
func (e *environment) post(ctx context.Context, api, path string, body any) ([]byte, error) {
	return e.postAs(ctx, api, token, "/api/v1/webhooks"+path, body)
}

// postAs sends a JSON request with the given token to one replica's API under /api/v1/....
func (e *environment) postAs(ctx context.Context, api, bearer, path string, body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+path, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, out)
	}
	return out, nil
}

// subscribe creates a subscription to the receiver for the given patterns.
func (e *environment) subscribe(ctx context.Context, path string, patterns ...string) error {
	_, err := e.post(ctx, e.apis[0], "/subscriptions", map[string]any{"url": e.receiver.url + path, "event_types": patterns})
	return err
}

// Keelson as a system under measurement.

func (e *environment) name() string     { return "Keelson" }
func (e *environment) rcv() *receiver   { return e.receiver }
func (e *environment) database() string { return e.dbURL }

func (e *environment) profiled() (string, int) { return e.profiles, e.procs[0].Process.Pid }

func (e *environment) addEndpoint(ctx context.Context, group, path string) error {
	return e.subscribe(ctx, path, group+".*")
}

func (e *environment) publish(ctx context.Context, client int, _, eventType string, data map[string]any) (string, error) {
	out, err := e.post(ctx, e.apis[client%len(e.apis)], "/events", map[string]any{"type": eventType, "data": data})
	if err != nil {
		return "", err
	}
	return decodeID(out), nil
}

// printReplicaCounters prints replica 0's samples of the named metrics: where the waits came from.
func printReplicaCounters(ctx context.Context, e *environment, names ...string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.profiles+"/metrics", nil)
	if err != nil {
		return
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Printf("replica 0's metrics: %v\n\n", err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println("replica 0's counters:")
	for line := range strings.Lines(string(body)) {
		for _, n := range names {
			if strings.HasPrefix(line, n) {
				fmt.Print("    ", line)
			}
		}
	}
	fmt.Println()
}

// fairnessDead is how many dead endpoints the -fairness run subscribes (all in one tenant at most).
func fairnessDead(o options) int {
	if !o.fairness {
		return 0
	}
	return o.dead
}
