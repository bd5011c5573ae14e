package egress

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTheClassifierRefusesEveryNonPublicAddress(t *testing.T) {
	for _, s := range []string{
		"0.0.0.0", "0.1.2.3", "127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.0.1", "172.31.255.255",
		"192.168.1.1", "169.254.169.254", "100.64.0.1", "100.127.255.255", "224.0.0.1", "239.255.255.255",
		"255.255.255.255", "240.0.0.1", "192.0.0.8", "192.0.2.1", "198.18.0.1", "198.19.255.255",
		"198.51.100.7", "203.0.113.9", "192.31.196.1", "192.52.193.1", "192.88.99.1", "192.175.48.1",
		"::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "ff02::1", "fec0::1",
		"::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "::127.0.0.1", "::ffff:8.8.8.8",
		// SIIT ::ffff:0:0:0/96 and local-use NAT64 64:ff9b:1::/48, both ends of each.
		"::ffff:0:0:0", "::ffff:0:ffff:ffff", "::ffff:0:7f00:1",
		"64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "64:ff9b:1::7f00:1",
		"64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b::808:808", "2002:7f00:1::", "2002:c0a8:101::1",
		"2001:db8::1", "100::1", "2001::1", "3fff::1", "2620:4f:8000::1",
	} {
		require.False(t, IsPublicAddress(netip.MustParseAddr(s)), "%s must be refused", s)
	}
	for _, s := range []string{
		"1.1.1.1", "8.8.8.8", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.32.0.1", "198.20.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001::200e",
	} {
		require.True(t, IsPublicAddress(netip.MustParseAddr(s)), "%s must be allowed", s)
	}
}

func TestTheDialGuardRefusesLoopbackAndNamesThatResolveToIt(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))

	guarded := Policy{}.DialContext(time.Second)
	for _, addr := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		_, err := guarded(context.Background(), "tcp", addr)
		require.ErrorIs(t, err, ErrBlockedAddress, addr)
	}
	open := Policy{AllowPrivate: true}.DialContext(time.Second)
	conn, err := open(context.Background(), "tcp", "127.0.0.1:"+port)
	require.NoError(t, err)
	_ = conn.Close()
	require.Zero(t, hits.Load())
}

func TestAnAllowListEntryMustBeHostAndPort(t *testing.T) {
	for _, entry := range []string{"receiver", "receiver:", ":9000", "receiver:0", "receiver:65536", "receiver:http", "http://receiver:9000"} {
		_, err := NewPolicy(false, []string{entry})
		require.Error(t, err, entry)
	}
	p := mustPolicy(t, "receiver:9000", "[::1]:8080", "Hooks.Example.com.:443")
	require.True(t, p.IsAllowedTarget("receiver:9000"))
	require.True(t, p.IsAllowedTarget("[::1]:8080"))
	require.True(t, p.IsAllowedTarget("hooks.example.com:443"))
	require.False(t, p.IsAllowedTarget("receiver:9001"))
}

func mustPolicy(t *testing.T, allowed ...string) Policy {
	t.Helper()
	p, err := NewPolicy(false, allowed)
	require.NoError(t, err)
	return p
}
