package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// UserAgent names the webhook sender to a proxy, as to an endpoint.
const UserAgent = "Keelson-Webhooks/1"

// DialFunc opens a connection to addr.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// ConnectDial reaches addr through the CONNECT proxy at proxy: the target is judged by the guard
// first (GuardTarget), then the proxy is dialed and asked for a tunnel to the address that passed.
func (p Policy) ConnectDial(proxy string, dialProxy DialFunc) DialFunc {
	return p.ConnectDialAuth(proxy, dialProxy, "")
}

// ProxyAuthorization is the Basic Proxy-Authorization of a proxy URL's user information.
func ProxyAuthorization(u *url.Userinfo) string {
	password, _ := u.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+password))
}

// ConnectDialAuth is ConnectDial with a Proxy-Authorization header ("" = none).
func (p Policy) ConnectDialAuth(proxy string, dialProxy DialFunc, auth string) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		target, err := p.GuardTarget(ctx, addr)
		if err != nil {
			return nil, err
		}
		conn, err := dialProxy(ctx, network, proxy)
		if err != nil {
			return nil, fmt.Errorf("egress proxy %s: %w", proxy, err)
		}
		tunnel, err := connectThrough(ctx, conn, target, auth)
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("egress proxy %s: %w", proxy, err)
		}
		return tunnel, nil
	}
}

// GuardTarget is the dial guard for a target reached through a proxy: an allow-listed target (or any,
// when private targets are allowed) goes as named; otherwise its name is resolved here and the first
// public address is what the proxy will be asked for. No public address: ErrBlockedAddress.
func (p Policy) GuardTarget(ctx context.Context, addr string) (string, error) {
	if p.AllowPrivate || p.IsAllowedTarget(addr) {
		return addr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
		return "", err
	}
	for _, ip := range ips {
		if ip = ip.Unmap(); IsPublicAddress(ip) {
			return net.JoinHostPort(ip.String(), port), nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrBlockedAddress, host)
}

// connectThrough asks the proxy on conn for a tunnel to target (RFC 9110 §9.3.6) and returns the
// tunnel once the proxy answered 2xx; bytes the proxy sent past its answer stay readable.
func connectThrough(ctx context.Context, conn net.Conn, target, auth string) (net.Conn, error) {
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
		defer func() { _ = conn.SetDeadline(time.Time{}) }()
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	req.Header.Set("User-Agent", UserAgent)
	if auth != "" {
		req.Header.Set("Proxy-Authorization", auth)
	}
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("CONNECT %s: %s", target, strings.TrimSpace(resp.Status))
	}
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn reads what the proxy sent with its answer before the rest of the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
