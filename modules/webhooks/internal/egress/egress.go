// Package egress decides where a replica may send a webhook: the SSRF guard. URLs are checked when
// a subscription is saved (IsPublicAddress on literal addresses, the allow-list by host:port), and
// every connection is checked again at dial time on the resolved address, so a name that resolves
// or rebinds to a private address is refused before any packet leaves. Anything that opens a
// connection for a delivery (the sender's transport, a proxy dialer) dials through Policy.DialContext.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// ErrBlockedAddress marks a connection refused by the SSRF guard.
var ErrBlockedAddress = errors.New("target address is not a public address")

// publicOnly refuses every special-purpose range of the IANA registries (code.dny.dev/ssrf generates
// them from the registries). IPv6 outside 2000::/3 — mapped, NAT64, ULA, link-local — is refused
// outright; ports are Keelson's URL validation's business, not the guard's.
var publicOnly = ssrf.New(ssrf.WithAnyPort())

// IsPublicAddress reports whether ip is globally routable unicast.
func IsPublicAddress(ip netip.Addr) bool {
	return ip.IsValid() && ip.Zone() == "" && publicOnly.SafeAddr(ip) == nil
}

// Policy decides which webhook targets a replica may reach: public addresses always, every
// address when private targets are allowed (dev and tests), and the exact host:port pairs of an
// allow-list (a receiver on the compose network) without switching the guard off for the rest.
type Policy struct {
	AllowPrivate bool            // every address is reachable: development and tests only
	allowed      map[string]bool // canonical host:port
}

// NewPolicy allows public addresses, every address when allowPrivate, and the host:port pairs listed.
func NewPolicy(allowPrivate bool, allowedTargets []string) (Policy, error) {
	p := Policy{AllowPrivate: allowPrivate, allowed: make(map[string]bool, len(allowedTargets))}
	for _, t := range allowedTargets {
		key, err := canonicalTarget(t)
		if err != nil {
			return Policy{}, fmt.Errorf("allowed target %q: %w", t, err)
		}
		p.allowed[key] = true
	}
	return p, nil
}

// canonicalTarget lower-cases the host of a host:port pair and checks the port is 1–65535.
func canonicalTarget(hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" {
		return "", errors.New("must be host:port")
	}
	if _, err := ParsePort(port); err != nil {
		return "", err
	}
	return net.JoinHostPort(strings.ToLower(strings.TrimSuffix(host, ".")), port), nil
}

// ParsePort accepts the decimal ports 1–65535.
func ParsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || s[0] == '+' || s[0] == '-' {
		return 0, errors.New("port must be a number")
	}
	if n < 1 || n > 65535 {
		return 0, errors.New("port must be between 1 and 65535")
	}
	return n, nil
}

// IsAllowedTarget reports whether host:port is on the allow-list.
func (p Policy) IsAllowedTarget(hostport string) bool {
	key, err := canonicalTarget(hostport)
	return err == nil && p.allowed[key]
}

// DialContext dials allow-listed targets (and everything, when private targets are allowed) plainly;
// every other connection goes through the guard. The allow-list is decided on the name before
// dialing, because the guard's Control sees only the resolved IP.
func (p Policy) DialContext(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	plain := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if p.AllowPrivate {
		return plain.DialContext
	}
	guarded := guardedDialer(timeout)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p.IsAllowedTarget(addr) {
			return plain.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
}

// guardedDialer dials only public addresses. The check runs in Control, on the address actually
// being connected to after DNS resolution, so a name that resolves (or rebinds) to a private
// address is refused before any packet leaves.
func guardedDialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second,
		Control: func(network, address string, raw syscall.RawConn) error {
			if err := publicOnly.Safe(network, address, raw); err != nil {
				return fmt.Errorf("%w: %w", ErrBlockedAddress, err)
			}
			return nil
		}}
}
