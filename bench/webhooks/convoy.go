package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

// convoy is the peer, Convoy (github.com/frain-dev/convoy), built from its source outside this
// repository and given as -convoy-bin: `convoy server` and `convoy agent` on a fresh database of the
// same PostgreSQL, and a Redis of their own (redis-server on PATH), all with Convoy's defaults except
// addresses, secrets, telemetry off and loopback targets allowed (its dispatcher blocks 127.0.0.0/8
// by default; Keelson's replicas run with WEBHOOKS_ALLOW_PRIVATE_TARGETS=true).
type convoy struct {
	dbURL    string
	dropDB   func()
	dir      string
	redis    *exec.Cmd
	procs    []*exec.Cmd // server, agent
	api      string
	key      string // the project's API key
	project  string
	receiver *receiver
	client   *http.Client
	limited  atomic.Int64 // 429 answers retried
}

// convoyConfig is Convoy's configuration file: what differs from its defaults.
func convoyConfig(db *url.URL, redisPort int, ports [4]int) map[string]any {
	port, _ := strconv.Atoi(db.Port())
	return map[string]any{
		"database": map[string]any{"type": "postgres", "scheme": "postgres", "host": db.Hostname(), "port": port,
			"username": db.User.Username(), "password": "", "database": db.Path[1:], "options": "sslmode=disable&connect_timeout=30"},
		"redis":      map[string]any{"scheme": "redis", "host": "127.0.0.1", "port": redisPort},
		"server":     map[string]any{"http": map[string]any{"port": ports[0], "worker_port": ports[1], "agent_port": ports[2], "ingest_port": ports[3]}},
		"analytics":  map[string]any{"enabled": false},
		"dispatcher": map[string]any{"allow_list": []string{"0.0.0.0/0", "::/0"}, "block_list": []string{}},
		"auth": map[string]any{"native": map[string]any{"enabled": true}, "is_signup_enabled": true,
			"jwt": map[string]any{"enabled": true, "secret": randomHex(16), "refresh_secret": randomHex(16)}},
	}
}

func newConvoy(ctx context.Context, o options) (*convoy, error) {
	c := &convoy{client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	var err error
	if c.dbURL, c.dropDB, err = benchenv.Throwaway(ctx, o.adminURL, "convoy_bench"); err != nil {
		return nil, err
	}
	if c.dir, err = os.MkdirTemp("", "convoy-bench"); err != nil {
		c.close()
		return nil, err
	}
	if c.receiver, err = newReceiver(ctx); err != nil {
		c.close()
		return nil, err
	}
	var ports [5]int
	for i := range ports {
		if ports[i], err = freePort(ctx); err != nil {
			c.close()
			return nil, err
		}
	}
	c.redis = exec.CommandContext(ctx, "redis-server", "--port", strconv.Itoa(ports[4]), "--bind", "127.0.0.1", "--dir", c.dir)
	if err := c.start(c.redis, "redis.log"); err != nil {
		c.close()
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	if err := waitListening(ctx, "127.0.0.1:"+strconv.Itoa(ports[4])); err != nil {
		c.close()
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	db, _ := url.Parse(c.dbURL)
	raw, _ := json.MarshalIndent(convoyConfig(db, ports[4], [4]int{ports[0], ports[1], ports[2], ports[3]}), "", "  ")
	config := filepath.Join(c.dir, "convoy.json")
	if err := os.WriteFile(config, raw, 0o600); err != nil {
		c.close()
		return nil, err
	}
	migrate := exec.CommandContext(ctx, o.convoyBin, "migrate", "up", "--config", config)
	migrate.Dir = c.dir
	if out, err := migrate.CombinedOutput(); err != nil {
		c.close()
		return nil, fmt.Errorf("convoy migrate up: %w: %s", err, out)
	}
	for _, component := range []string{"server", "agent"} {
		cmd := exec.CommandContext(ctx, o.convoyBin, component, "--config", config) // stopped by SIGTERM in close
		cmd.Dir = c.dir
		if err := c.start(cmd, component+".log"); err != nil {
			c.close()
			return nil, err
		}
		c.procs = append(c.procs, cmd)
	}
	c.api = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	if err := waitOK(ctx, c.api+"/healthz", 2*time.Minute); err != nil {
		c.close()
		return nil, fmt.Errorf("convoy server: %w (logs in %s)", err, c.dir)
	}
	if err := c.createProject(ctx); err != nil {
		c.close()
		return nil, fmt.Errorf("convoy project: %w (logs in %s)", err, c.dir)
	}
	return c, nil
}

func (c *convoy) start(cmd *exec.Cmd, logName string) error {
	logFile, err := os.Create(filepath.Clean(filepath.Join(c.dir, logName)))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	return cmd.Start()
}

func waitListening(ctx context.Context, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	var d net.Dialer
	for time.Now().Before(deadline) {
		if conn, err := d.DialContext(ctx, "tcp", addr); err == nil {
			_ = conn.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not listening after 30s", addr)
}

// call sends a JSON request and decodes the "data" of Convoy's answer into out (if not nil).
func (c *convoy) call(ctx context.Context, method, path, bearer string, body, out any) (int, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.api+path, bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		var envelope struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(b, &envelope); err != nil {
			return resp.StatusCode, err
		}
		return resp.StatusCode, json.Unmarshal(envelope.Data, out)
	}
	return resp.StatusCode, nil
}

// createProject signs in as the superuser Convoy creates on first start, creates an organisation
// and an outgoing project, and keeps the project's API key.
func (c *convoy) createProject(ctx context.Context) error {
	var login struct {
		Token struct {
			AccessToken string `json:"access_token"`
		} `json:"token"`
	}
	if _, err := c.call(ctx, http.MethodPost, "/ui/auth/login", "", map[string]string{"username": "superuser@default.com", "password": "default"}, &login); err != nil {
		return err
	}
	var org struct {
		UID string `json:"uid"`
	}
	if _, err := c.call(ctx, http.MethodPost, "/ui/organisations", login.Token.AccessToken, map[string]string{"name": "bench"}, &org); err != nil {
		return err
	}
	var project struct {
		APIKey struct {
			Key string `json:"key"`
		} `json:"api_key"`
		Project struct {
			UID string `json:"uid"`
		} `json:"project"`
	}
	if _, err := c.call(ctx, http.MethodPost, "/ui/organisations/"+org.UID+"/projects", login.Token.AccessToken,
		map[string]string{"name": "bench", "type": "outgoing"}, &project); err != nil {
		return err
	}
	c.key, c.project = project.APIKey.Key, project.Project.UID
	return nil
}

func (c *convoy) name() string     { return "Convoy" }
func (c *convoy) rcv() *receiver   { return c.receiver }
func (c *convoy) database() string { return c.dbURL }

// profiled: Convoy's agent does the deliveries; it serves no pprof endpoint with its defaults.
func (c *convoy) profiled() (string, int) { return "", c.procs[1].Process.Pid }

// addEndpoint creates an endpoint owned by group (the fan-out API addresses endpoints by owner) and
// its subscription to every event type.
func (c *convoy) addEndpoint(ctx context.Context, group, path string) error {
	var endpoint struct {
		UID string `json:"uid"`
	}
	base := "/api/v1/projects/" + c.project
	if _, err := c.call(ctx, http.MethodPost, base+"/endpoints", c.key,
		map[string]any{"name": group + path, "url": c.receiver.url + path, "owner_id": group}, &endpoint); err != nil {
		return err
	}
	_, err := c.call(ctx, http.MethodPost, base+"/subscriptions", c.key, map[string]any{
		"name": group + path, "endpoint_id": endpoint.UID, "filter_config": map[string]any{"event_types": []string{"*"}}}, nil)
	return err
}

// publish posts a fan-out event to the group's endpoints; its deliveries carry X-Bench-Id. Answers
// 429 (Convoy's ingest and API rate limits) are retried and counted.
func (c *convoy) publish(ctx context.Context, _ int, group, eventType string, data map[string]any) (string, error) {
	id := randomHex(8)
	body := map[string]any{"owner_id": group, "event_type": eventType, "data": data, "custom_headers": map[string]string{"X-Bench-Id": id}}
	for {
		status, err := c.call(ctx, http.MethodPost, "/api/v1/projects/"+c.project+"/events/fanout", c.key, body, nil)
		if status != http.StatusTooManyRequests {
			return id, err
		}
		c.limited.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *convoy) cpu(ctx context.Context) cpuSample {
	var s cpuSample
	for _, p := range c.procs {
		s.app += cpuSeconds(p.Process.Pid)
	}
	if c.redis != nil && c.redis.Process != nil {
		s.other = cpuSeconds(c.redis.Process.Pid)
	}
	s.postgres = backendsCPU(ctx, c.dbURL)
	return s
}

// close stops Convoy (SIGTERM) and Redis, and drops the database; the logs stay in c.dir.
func (c *convoy) close() {
	if n := c.limited.Load(); n > 0 {
		fmt.Printf("(Convoy answered 429 to %d event posts, retried)\n\n", n)
	}
	stop := func(p *exec.Cmd) {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.Process.Kill()
		}
	}
	for _, p := range c.procs {
		stop(p)
	}
	if c.redis != nil && c.redis.Process != nil {
		stop(c.redis)
	}
	if c.receiver != nil {
		c.receiver.close()
	}
	if c.dropDB != nil {
		c.dropDB()
	}
}
