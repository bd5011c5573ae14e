package webhooks

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelson/keelson/modules/webhooks/internal/egress"
	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	"github.com/stretchr/testify/require"
)

func TestAnAllowListedTargetIsReachedWhileTheGuardKeepsRefusingTheRest(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(100) }))
	defer other.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	_, otherPort, _ := net.SplitHostPort(strings.TrimPrefix(other.URL, "http://"))

	policy, err := egress.NewPolicy(false, []string{"LocalHost:" + port})
	require.NoError(t, err)
	s := newSender(time.Second, policy, 8, time.Now)
	send := func(url string) sendResult {
		return s.send(context.Background(), outgoing{URL: url, MessageID: "msg_1", Body: []byte("{}"), Keys: []signing.Key{signing.NewKey([]byte("k"))}})
	}

	require.True(t, send("http://localhost:"+port+"/hooks").Succeeded())
	require.Equal(t, int32(1), hits.Load())
	// The same server by IP, and another port on the same name, are not on the list.
	require.Equal(t, errClassSSRFBlocked, send("http://127.0.0.1:"+port+"/hooks").ErrorClass)
	require.Equal(t, errClassSSRFBlocked, send("http://localhost:"+otherPort+"/hooks").ErrorClass)
	require.Equal(t, int32(1), hits.Load())

	require.NoError(t, validateTargetURL("http://127.0.0.1:9000/hooks", mustPolicy(t, "127.0.0.1:9000")))
	require.Error(t, validateTargetURL("http://127.0.0.1:9001/hooks", mustPolicy(t, "127.0.0.1:9000")))
}

func TestTargetUrlsAreValidatedAtCreateTime(t *testing.T) {
	guarded := egress.Policy{}
	for _, u := range []string{
		"https://example.com/hook", "http://example.com:8080/a?b=c", "https://hooks.example.com", "http://localhost:9000/x",
		"http://8.8.8.8/hook", "http://[2606:4700:4700::1111]/hook", "http://example.com:65535/", "http://example.com:1/",
		"https://example.com/a%20b?q=%41",
	} {
		require.NoError(t, validateTargetURL(u, guarded), u)
	}
	for _, u := range []string{
		"", "example.com/hook", "ftp://example.com/x", "javascript:alert(1)", "http://", "http:///path",
		"http://user:pw@example.com/", "http://user@example.com/", "https://exa mple.com/", "http://example.com/a b",
		"https://example.com/" + strings.Repeat("a", maxURLLength),
		"http://127.0.0.1/hook", "http://10.0.0.1/", "http://[::1]:8080/", "http://169.254.169.254/latest",
		"http://[::ffff:127.0.0.1]/", "http://0.0.0.0/", "http://100.64.1.1/", "http://[fe80::1%25eth0]/",
		"http://[64:ff9b:1::7f00:1]/", "http://[::ffff:0:7f00:1]/",
		"http://example.com:0/", "http://example.com:65536/", "http://example.com:99999/", "http://example.com:00/",
		"http://ex%C3%A4mple.com/", "http://%C3%A4.example.com:9000/",
	} {
		require.Error(t, validateTargetURL(u, guarded), u)
	}
	open := egress.Policy{AllowPrivate: true}
	require.NoError(t, validateTargetURL("http://127.0.0.1:1234/hook", open))
	require.NoError(t, validateTargetURL("http://[::1]:1234/hook", open))
	require.Error(t, validateTargetURL("http://127.0.0.1:0/hook", open))
	require.Error(t, validateTargetURL("http://127.0.0.1:70000/hook", open))
	require.NoError(t, validateTargetURL("http://receiver:9000/hooks", mustPolicy(t, "receiver:9000")))
}

func mustPolicy(t *testing.T, allowed ...string) egress.Policy {
	t.Helper()
	p, err := egress.NewPolicy(false, allowed)
	require.NoError(t, err)
	return p
}
