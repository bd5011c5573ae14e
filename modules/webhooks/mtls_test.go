package webhooks

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// testCA issues the certificates of a test: a server certificate for 127.0.0.1 and client ones.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue returns a certificate and key in PEM, for a server (an IP) or a client (a common name).
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// mtlsReceiver is an https endpoint that requires a client certificate of its CA and records the
// common name each request presented.
type mtlsReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	names []string
}

func newMTLSReceiver(t *testing.T, ca *testCA) *mtlsReceiver {
	t.Helper()
	rc := &mtlsReceiver{}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.names = append(rc.names, r.TLS.PeerCertificates[0].Subject.CommonName)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	certPEM, keyPEM := ca.issue(t, "receiver", true)
	serverCert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	rc.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		MinVersion: tls.VersionTLS12}
	rc.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test's own
	rc.StartTLS()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *mtlsReceiver) presented() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.names...)
}

func TestAnEndpointRequiringAClientCertificateGetsTheSubscriptionsOwnOnTwoReplicasWithItsKeySealed(t *testing.T) {
	ca := newTestCA(t)
	rc := newMTLSReceiver(t, ca)
	cfg := testConfig()
	cfg.RetrySchedule = []time.Duration{time.Hour}
	box := testBox(t, testKey1)
	a := newHarness(t, cfg, harnessOptions{bus: true, jobs: true, secrets: box})
	b := newHarness(t, cfg, harnessOptions{database: a.database, bus: true, jobs: true, secrets: box})
	certPEM, keyPEM := ca.issue(t, "acme-client", false)

	r := a.call(http.MethodPost, "/subscriptions", map[string]any{"url": rc.URL, "event_types": []string{"mtls.*"},
		"tls_client_certificate": certPEM, "tls_client_key": keyPEM, "tls_ca_bundle": ca.pem})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	id := r.json(t)["id"].(string)
	require.NotContains(t, string(r.body), "PRIVATE KEY")
	require.NotContains(t, r.json(t), "tls_client_key")
	for _, h := range []*harness{a, b} {
		got := h.statusOf(id)
		require.Equal(t, certPEM, got["tls_client_certificate"])
		require.Equal(t, ca.pem, got["tls_ca_bundle"])
		list := h.call(http.MethodGet, "/subscriptions", nil)
		require.NotContains(t, string(list.body), "PRIVATE KEY")
	}
	var stored string
	require.NoError(t, a.db.Gorm().Raw(`SELECT tls_client_key FROM webhook_subscriptions WHERE id = ?`, id).Row().Scan(&stored))
	require.True(t, strings.HasPrefix(stored, "v1:"), "the key is stored sealed")
	require.NotContains(t, stored, "PRIVATE KEY")

	// Without a client certificate, and without the CA bundle, the same receiver refuses the handshake.
	r = b.call(http.MethodPost, "/subscriptions", map[string]any{"url": rc.URL, "event_types": []string{"nocert.*"}, "tls_ca_bundle": ca.pem})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	r = b.call(http.MethodPost, "/subscriptions", map[string]any{"url": rc.URL, "event_types": []string{"noca.*"},
		"tls_client_certificate": certPEM, "tls_client_key": keyPEM})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))

	for i := range 6 {
		[]*harness{a, b}[i%2].publish("mtls.sent", map[string]any{"i": i})
	}
	noCert := a.publish("nocert.sent", map[string]any{})
	noCA := b.publish("noca.sent", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { return len(rc.presented()) == 6 }, "every event through mTLS")
	for _, cn := range rc.presented() {
		require.Equal(t, "acme-client", cn)
	}
	for _, eventID := range []string{noCert, noCA} {
		hosttest.Eventually(t, 20*time.Second, func() bool { d, _ := deliveryOf(t, a, eventID); return d.AttemptCount == 1 && d.ClaimID == nil },
			"refused handshake recorded")
		_, attempts := deliveryOf(t, a, eventID)
		require.Equal(t, ResultFailed, attempts[0].Result)
		require.Nil(t, attempts[0].StatusCode, attempts[0].Error)
	}

	// A new certificate applies from the next send on both replicas; "" in both removes it.
	cert2, key2 := ca.issue(t, "acme-client-2", false)
	r = b.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"tls_client_certificate": cert2, "tls_client_key": key2})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	a.publish("mtls.sent", map[string]any{})
	b.publish("mtls.sent", map[string]any{})
	hosttest.Eventually(t, 20*time.Second, func() bool { return len(rc.presented()) == 8 }, "sent with the new certificate")
	require.Equal(t, []string{"acme-client-2", "acme-client-2"}, rc.presented()[6:])
	r = a.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"tls_client_certificate": "", "tls_client_key": ""})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Empty(t, r.json(t)["tls_client_certificate"])
	require.NoError(t, a.db.Gorm().Raw(`SELECT tls_client_key FROM webhook_subscriptions WHERE id = ?`, id).Row().Scan(&stored))
	require.Empty(t, stored, "removed with its certificate")
}

func TestBadClientCertificatesKeysAndCABundlesGet422NamingTheFieldAndChangeNothing(t *testing.T) {
	ca := newTestCA(t)
	h := newHarness(t, testConfig(), harnessOptions{})
	id, _ := h.subscribe("https://example.com/h", "*")
	before := h.statusOf(id)
	certPEM, keyPEM := ca.issue(t, "c", false)
	_, otherKey := ca.issue(t, "d", false)
	for _, c := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"certificate without key", map[string]any{"tls_client_certificate": certPEM}, "tls_client_key"},
		{"key without certificate", map[string]any{"tls_client_key": keyPEM}, "tls_client_certificate"},
		{"empty key", map[string]any{"tls_client_certificate": certPEM, "tls_client_key": ""}, "tls_client_key"},
		{"another certificate's key", map[string]any{"tls_client_certificate": certPEM, "tls_client_key": otherKey}, "tls_client_key"},
		{"not PEM", map[string]any{"tls_client_certificate": "hello", "tls_client_key": keyPEM}, "tls_client_certificate"},
		{"a key as certificate", map[string]any{"tls_client_certificate": keyPEM, "tls_client_key": keyPEM}, "tls_client_certificate"},
		{"CA bundle without certificate", map[string]any{"tls_ca_bundle": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}, "tls_ca_bundle"},
		{"oversized CA bundle", map[string]any{"tls_ca_bundle": strings.Repeat(ca.pem, 200)}, "tls_ca_bundle"},
	} {
		for _, write := range []struct{ method, path string }{{http.MethodPost, "/subscriptions"}, {http.MethodPatch, "/subscriptions/" + id}} {
			body := map[string]any{"url": "https://example.com/h", "event_types": []string{"*"}}
			for k, v := range c.body {
				body[k] = v
			}
			r := h.call(write.method, write.path, body)
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s %s: %s", write.method, c.name, r.body)
			require.Equal(t, c.field, r.json(t)["errors"].([]any)[0].(map[string]any)["field"], "%s: %s", c.name, r.body)
			require.NotContains(t, string(r.body), "PRIVATE KEY")
		}
	}
	require.Equal(t, before, h.statusOf(id))
	require.Equal(t, int64(1), h.count(`SELECT count(*) FROM webhook_subscriptions`))
}
