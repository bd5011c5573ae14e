package webhooks

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// connectProxy is an HTTP CONNECT proxy on loopback recording the targets it is asked for. It opens
// tunnels to loopback targets only and answers 502 to any other, so nothing leaves the machine.
type connectProxy struct {
	addr string
	mu   sync.Mutex
	asks []string // the CONNECT targets, in order
	auth []string // their Proxy-Authorization
}

func newConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &connectProxy{addr: l.Addr().String()}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(conn)
		}
	}()
	return p
}

func (p *connectProxy) serve(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.asks = append(p.asks, req.Host)
	p.auth = append(p.auth, req.Header.Get("Proxy-Authorization"))
	p.mu.Unlock()
	host, _, _ := net.SplitHostPort(req.Host)
	if req.Method != http.MethodConnect || host != "127.0.0.1" {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	target, err := net.Dial("tcp", req.Host)
	if err != nil {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer target.Close()
	_, _ = io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() { _, _ = io.Copy(target, br); _ = target.(*net.TCPConn).CloseWrite() }()
	_, _ = io.Copy(conn, target)
}

func (p *connectProxy) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asks...)
}

func (p *connectProxy) authorizations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auth...)
}

func TestRequestsLeaveThroughTheEgressProxyWhileTheGuardJudgesTheirFinalTargetOnTwoReplicas(t *testing.T) {
	deployment, own := newConnectProxy(t), newConnectProxy(t)
	rc := newReceiver(t, nil)
	rcAddr := strings.TrimPrefix(rc.URL, "http://")
	_, rcPort, _ := net.SplitHostPort(rcAddr)
	cfg := testConfig()
	cfg.AllowPrivateTargets = false // the guard is on: only the receiver and the endpoint's own proxy are let through
	cfg.AllowedTargets = []string{rcAddr, own.addr}
	cfg.EgressProxy = "http://ops:s3cret@" + deployment.addr
	cfg.RetrySchedule = []time.Duration{time.Hour}
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true})
	b := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true})

	proxied, _ := a.subscribe(rc.URL+"/deployment", "via.deployment")
	r := b.call(http.MethodPost, "/subscriptions", map[string]any{"url": rc.URL + "/own", "event_types": []string{"via.own"},
		"proxy_url": "http://" + own.addr})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	ownID := r.json(t)["id"].(string)
	require.Equal(t, "http://"+own.addr, a.statusOf(ownID)["proxy_url"])
	require.Empty(t, a.statusOf(proxied)["proxy_url"])
	// A name resolving to loopback, not on the allow-list: refused by the guard before the proxy is asked.
	a.subscribe("http://localhost:"+rcPort+"/blocked", "via.blocked")
	// A public address: the proxy is asked for it (and, being a test proxy, refuses to leave loopback).
	b.subscribe("http://93.184.216.34/public", "via.public")

	for i := range 4 {
		h := []*harness{a, b}[i%2]
		h.publish("via.deployment", map[string]any{"i": i})
		h.publish("via.own", map[string]any{"i": i})
	}
	eBlocked := a.publish("via.blocked", map[string]any{})
	ePublic := b.publish("via.public", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { return rc.count() == 8 }, "every proxied event at the receiver")
	hosttest.Eventually(t, 20*time.Second, func() bool {
		d1, _ := deliveryOf(t, a, eBlocked)
		d2, _ := deliveryOf(t, a, ePublic)
		return d1.AttemptCount == 1 && d2.AttemptCount == 1 && d1.ClaimID == nil && d2.ClaimID == nil
	}, "the blocked and the public delivery attempted once each")

	_, attempts := deliveryOf(t, a, eBlocked)
	require.Equal(t, errClassSSRFBlocked, attempts[0].ErrorClass, attempts[0].Error)
	_, attempts = deliveryOf(t, a, ePublic)
	require.Equal(t, errClassConnection, attempts[0].ErrorClass)
	require.Contains(t, attempts[0].Error, "CONNECT 93.184.216.34:80: 502")

	asked := deployment.asked()
	require.NotContains(t, asked, "localhost:"+rcPort)
	require.Contains(t, asked, "93.184.216.34:80", "the proxy is asked for the address the guard passed")
	for _, target := range asked {
		require.Contains(t, []string{rcAddr, "93.184.216.34:80"}, target)
	}
	require.NotEmpty(t, own.asked(), "the endpoint's own proxy carried its requests")
	for _, target := range own.asked() {
		require.Equal(t, rcAddr, target)
	}
	for _, auth := range deployment.authorizations() {
		require.Equal(t, "Basic b3BzOnMzY3JldA==", auth, "the deployment proxy's credentials")
	}
	for _, auth := range own.authorizations() {
		require.Empty(t, auth, "the deployment's credentials never go to an endpoint's proxy")
	}
	hosttest.Eventually(t, 20*time.Second, func() bool {
		return a.count(`SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
			WHERE d.event_type IN ('via.deployment', 'via.own') AND a.result = 'succeeded'`) == 8
	}, "each proxied delivery succeeded at its first attempt")
	require.Equal(t, int64(8), a.count(`SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
		WHERE d.event_type IN ('via.deployment', 'via.own')`))
}

func TestABadProxyURLGets422NamingTheFieldAndChangesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.AllowPrivateTargets = false
	h := newHarness(t, cfg, harnessOptions{})
	id, _ := h.subscribe("https://example.com/h", "*")
	before := h.statusOf(id)
	for _, bad := range []string{"https://proxy.example:3128", "http://user:pass@proxy.example:3128", "http://127.0.0.1:3128",
		"socks5://proxy.example:1080", "http://proxy.example:3128/path", "http://proxy.example:0", "proxy.example:3128"} {
		for _, write := range []struct{ method, path string }{{http.MethodPost, "/subscriptions"}, {http.MethodPatch, "/subscriptions/" + id}} {
			r := h.call(write.method, write.path, map[string]any{"url": "https://example.com/h", "event_types": []string{"*"}, "proxy_url": bad})
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s %q: %s", write.method, bad, r.body)
			require.Equal(t, "proxy_url", r.json(t)["errors"].([]any)[0].(map[string]any)["field"], string(r.body))
		}
	}
	require.Equal(t, before, h.statusOf(id))
	require.Equal(t, int64(1), h.count(`SELECT count(*) FROM webhook_subscriptions`))
}

func TestAnEgressProxySettingThatIsNotAnHTTPProxyURLIsRefusedAtStart(t *testing.T) {
	for _, bad := range []string{"https://proxy:3128", "socks5://proxy:1080", "http://:3128", "http://proxy:99999", "http://proxy:3128/x"} {
		cfg := testConfig()
		cfg.EgressProxy = bad
		_, err := New(cfg)
		require.ErrorContains(t, err, "EgressProxy", bad)
	}
}
