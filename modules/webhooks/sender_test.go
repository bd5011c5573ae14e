package webhooks

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelson/keelson/modules/webhooks/internal/egress"
	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

type captured struct {
	header http.Header
	body   []byte
}

func TestTheSenderSendsTheSignedBytesWithAFreshTimestampAndTheSameId(t *testing.T) {
	var mu sync.Mutex
	var got []captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, captured{r.Header.Clone(), b})
		mu.Unlock()
		_, _ = w.Write([]byte(strings.Repeat("é", 1000))) // 2000 bytes, multi-byte runes
	}))
	defer srv.Close()
	secret, _ := signing.NewSecret()
	key, _ := signing.SecretKey(secret)
	body := []byte(`{"id":"evt_9","type":"a.b","timestamp":"2026-01-01T00:00:00Z","data":{"k":"v"}}`)
	clock := time.Unix(1_700_000_000, 0)
	s := newSender(time.Second, egress.Policy{AllowPrivate: true}, 8, func() time.Time { return clock })

	first := s.send(context.Background(), outgoing{URL: srv.URL, MessageID: "evt_9", Body: body, Keys: []signing.Key{signing.NewKey(key)}})
	clock = clock.Add(90 * time.Second)
	second := s.send(context.Background(), outgoing{URL: srv.URL, MessageID: "evt_9", Body: body, Keys: []signing.Key{signing.NewKey(key)}})

	require.True(t, first.Succeeded())
	require.True(t, second.Succeeded())
	require.LessOrEqual(t, len(first.Excerpt), responseExcerptBytes)
	require.True(t, strings.HasPrefix(first.Excerpt, "éé"))
	require.Len(t, got, 2)
	wh, _ := standardwebhooks.NewWebhook(secret)
	for _, c := range got {
		require.Equal(t, body, c.body)
		require.Equal(t, "evt_9", c.header.Get("webhook-id"))
		require.Equal(t, "application/json", c.header.Get("Content-Type"))
		require.NoError(t, wh.VerifyIgnoringTimestamp(c.body, c.header))
	}
	require.Equal(t, "1700000000", got[0].header.Get("webhook-timestamp"))
	require.Equal(t, "1700000090", got[1].header.Get("webhook-timestamp"))
	require.NotEqual(t, got[0].header.Get("webhook-signature"), got[1].header.Get("webhook-signature"))
}

func TestTheSenderClassifiesFailures(t *testing.T) {
	var redirected atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { redirected.Add(1) }))
	defer target.Close()
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target.URL, http.StatusFound) })
	mux.HandleFunc("/500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	mux.HandleFunc("/slow", func(http.ResponseWriter, *http.Request) {
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for the slow handler
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	key := make([]byte, 32)
	s := newSender(200*time.Millisecond, egress.Policy{AllowPrivate: true}, 8, time.Now)
	send := func(s *sender, url string) sendResult {
		return s.send(context.Background(), outgoing{URL: url, MessageID: "m", Body: []byte(`{}`), Keys: []signing.Key{signing.NewKey(key)}})
	}

	r := send(s, srv.URL+"/redirect")
	require.False(t, r.Succeeded())
	require.Equal(t, http.StatusFound, r.StatusCode)
	require.Equal(t, errClassHTTPStatus, r.ErrorClass)
	require.Zero(t, redirected.Load(), "a redirect is not followed")

	r = send(s, srv.URL+"/500")
	require.Equal(t, 500, r.StatusCode)
	require.Equal(t, errClassHTTPStatus, r.ErrorClass)
	require.Equal(t, "boom\n", r.Excerpt)

	r = send(s, srv.URL+"/slow")
	require.Equal(t, errClassTimeout, r.ErrorClass)
	require.Zero(t, r.StatusCode)

	r = send(s, closedURL)
	require.Equal(t, errClassConnection, r.ErrorClass)

	guarded := newSender(time.Second, egress.Policy{}, 8, time.Now)
	r = send(guarded, target.URL)
	require.Equal(t, errClassSSRFBlocked, r.ErrorClass)
	require.Zero(t, r.StatusCode)
	r = send(guarded, strings.Replace(target.URL, "127.0.0.1", "localhost", 1))
	require.Equal(t, errClassSSRFBlocked, r.ErrorClass)
	require.Zero(t, redirected.Load())
}

func TestTheSenderSpeaksHTTP2ToATLSReceiverThatOffersItOverOneConnection(t *testing.T) {
	var protos sync.Map
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		w.WriteHeader(http.StatusNoContent)
	}))
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	s := newSender(5*time.Second, egress.Policy{AllowPrivate: true}, 8, time.Now)
	s.client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	secret, err := signing.NewSecret()
	require.NoError(t, err)
	key, _ := signing.SecretKey(secret)

	// One send opens the connection; then many at once share it.
	require.True(t, s.send(context.Background(), outgoing{URL: srv.URL, MessageID: "evt_0", Body: []byte(`{}`), Keys: []signing.Key{signing.NewKey(key)}}).Succeeded())
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 20 {
		wg.Go(func() {
			res := s.send(context.Background(), outgoing{URL: srv.URL, MessageID: "evt_" + strconv.Itoa(i+1), Body: []byte(`{}`), Keys: []signing.Key{signing.NewKey(key)}})
			if !res.Succeeded() {
				failed.Add(1)
			}
		})
	}
	wg.Wait()

	require.Zero(t, failed.Load())
	seen := []string{}
	protos.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })
	require.Equal(t, []string{"HTTP/2.0"}, seen)
	require.Equal(t, int32(1), conns.Load(), "21 requests, one connection")
}

func TestSigningARequestAllocatesOnlyItsSignature(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop HMAC states on purpose")
	}
	secret, err := signing.NewSecret()
	require.NoError(t, err)
	key, _ := signing.SecretKey(secret)
	keys := []signing.Key{signing.NewKey(key)}
	body := []byte(strings.Repeat(`{"k":"v"}`, 100))
	signing.Header(keys, "evt_1", 1_700_000_000, body) // the pool's first HMAC state
	allocs := testing.AllocsPerRun(200, func() { signing.Header(keys, "evt_1", 1_700_000_000, body) })
	require.LessOrEqual(t, allocs, 1.0, "the signature string; the HMAC state comes from the key's pool")
}

func TestABurstAsLargeAsTheReplicasConcurrencyFindsItsConnectionsAgainInsteadOfDialingAnew(t *testing.T) {
	const concurrency, rounds = 200, 3 // 200: above any fixed pool a host was given
	var dials, arrived atomic.Int64
	released := make([]chan struct{}, rounds)
	for i := range released {
		released[i] = make(chan struct{})
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := arrived.Add(1)
		round := released[(n-1)/concurrency]
		if n%concurrency == 0 {
			close(round) // the whole burst is in flight, each request on a connection of its own
		}
		select {
		case <-round:
		case <-time.After(10 * time.Second):
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	s := newSender(10*time.Second, egress.Policy{AllowPrivate: true}, concurrency, time.Now)

	for round := range rounds {
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range concurrency {
			wg.Go(func() {
				if !s.send(context.Background(), outgoing{URL: srv.URL, MessageID: "evt_1", Body: []byte(`{}`)}).Succeeded() {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		require.Zero(t, failed.Load())
		require.EqualValues(t, concurrency, dials.Load(), "round %d: every connection was kept alive for the next burst", round+1)
	}
}
