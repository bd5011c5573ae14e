package webhooks

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

func Test_the_classifier_refuses_every_non_public_address(t *testing.T) {
	for _, s := range []string{
		"0.0.0.0", "0.1.2.3", "127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.0.1", "172.31.255.255",
		"192.168.1.1", "169.254.169.254", "100.64.0.1", "100.127.255.255", "224.0.0.1", "239.255.255.255",
		"255.255.255.255", "240.0.0.1", "192.0.0.8", "192.0.2.1", "198.18.0.1", "198.19.255.255",
		"198.51.100.7", "203.0.113.9",
		"::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "ff02::1", "fec0::1",
		"::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "::127.0.0.1",
		"64:ff9b::7f00:1", "64:ff9b::a00:1", "2002:7f00:1::", "2002:c0a8:101::1", "2001:db8::1", "100::1",
	} {
		require.False(t, isPublicAddress(netip.MustParseAddr(s)), "%s must be refused", s)
	}
	for _, s := range []string{
		"1.1.1.1", "8.8.8.8", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.32.0.1", "198.20.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
	} {
		require.True(t, isPublicAddress(netip.MustParseAddr(s)), "%s must be allowed", s)
	}
}

func Test_the_dial_guard_refuses_loopback_and_names_that_resolve_to_it(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))

	guarded := guardedDialer(time.Second, false)
	for _, addr := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		_, err := guarded.DialContext(context.Background(), "tcp", addr)
		require.ErrorIs(t, err, errBlockedAddress, addr)
	}
	open := guardedDialer(time.Second, true)
	conn, err := open.DialContext(context.Background(), "tcp", "127.0.0.1:"+port)
	require.NoError(t, err)
	_ = conn.Close()
	require.Zero(t, hits.Load())
}

func Test_target_urls_are_validated_at_create_time(t *testing.T) {
	for _, u := range []string{
		"https://example.com/hook", "http://example.com:8080/a?b=c", "https://hooks.example.com", "http://localhost:9000/x",
		"http://8.8.8.8/hook", "http://[2606:4700:4700::1111]/hook",
	} {
		require.NoError(t, validateTargetURL(u, false), u)
	}
	for _, u := range []string{
		"", "example.com/hook", "ftp://example.com/x", "javascript:alert(1)", "http://", "http:///path",
		"http://user:pw@example.com/", "http://user@example.com/", "https://exa mple.com/", "http://example.com/a b",
		"https://example.com/" + strings.Repeat("a", maxURLLength),
		"http://127.0.0.1/hook", "http://10.0.0.1/", "http://[::1]:8080/", "http://169.254.169.254/latest",
		"http://[::ffff:127.0.0.1]/", "http://0.0.0.0/", "http://100.64.1.1/", "http://[fe80::1%25eth0]/",
	} {
		require.Error(t, validateTargetURL(u, false), u)
	}
	require.NoError(t, validateTargetURL("http://127.0.0.1:1234/hook", true))
	require.NoError(t, validateTargetURL("http://[::1]:1234/hook", true))
}
