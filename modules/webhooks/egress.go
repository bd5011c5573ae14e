package webhooks

import (
	"container/list"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/internal/egress"
	"github.com/keelson/keelson/platform/apperr"
)

// The outbound path of a request: straight to the endpoint (the sender's transport), or through an
// HTTP CONNECT proxy (the deployment's, WEBHOOKS_EGRESS_PROXY, or the endpoint's own proxy_url), with
// the endpoint's client certificate and CA bundle (mTLS) when it has them. The SSRF guard judges the
// final target in every case: through a proxy, the target's name is resolved and classified here and
// the proxy is asked to CONNECT to the address that passed, so neither the proxy's own resolution nor
// a rebinding name can lead it elsewhere.

// ParseEgressProxy reads a CONNECT proxy URL: http://[user:password@]host[:port], nothing after the
// authority; "" is none (nil).
func ParseEgressProxy(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("must be a URL")
	case u.Scheme != "http":
		return nil, errors.New("scheme must be http (the CONNECT request; TLS to the endpoint runs inside the tunnel)")
	case u.Hostname() == "":
		return nil, errors.New("must have a host")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return nil, errors.New("must be http://host:port with nothing after it")
	}
	if p := u.Port(); p != "" {
		if _, err := egress.ParsePort(p); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// RedactedProxy shows a proxy URL without its password.
func RedactedProxy(raw string) string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil {
		return raw
	}
	return u.Redacted()
}

// endpointEgress is what an endpoint adds to the outbound path; the zero value adds nothing.
type endpointEgress struct {
	proxy   string // the endpoint's CONNECT proxy, "" = the deployment's (if any)
	certPEM string // client certificate chain
	keyPEM  string // its private key, opened
	caPEM   string // CA bundle trusted for the endpoint instead of the system roots
}

func (e endpointEgress) isZero() bool { return e == endpointEgress{} }

// key names an outbound path in the transports cache: a digest, so no key material is a map key.
func (e endpointEgress) key() [32]byte {
	return sha256.Sum256([]byte(e.proxy + "\x00" + e.certPEM + "\x00" + e.keyPEM + "\x00" + e.caPEM))
}

type egressKey struct{}

// withEgress makes the sender's request of ctx take the endpoint's outbound path.
func withEgress(ctx context.Context, e endpointEgress) context.Context {
	if e.isZero() {
		return ctx
	}
	return context.WithValue(ctx, egressKey{}, e)
}

// egressTransports is the sender's RoundTripper: a request goes through the transport of its outbound
// path, built on first use from the sender's own (same pools, timeouts, HTTP/2, guard) and kept; the
// least recently used beyond maxEgressTransports is dropped with its idle connections.
type egressTransports struct {
	base       *http.Transport
	deployment *url.URL // WEBHOOKS_EGRESS_PROXY; nil = none
	targets    egress.Policy
	timeout    time.Duration

	mu    sync.Mutex
	byKey map[[32]byte]*list.Element
	order list.List
}

const maxEgressTransports = 1024

type egressEntry struct {
	key [32]byte
	tr  *http.Transport
}

func newEgressTransports(base *http.Transport, deployment *url.URL, targets egress.Policy, timeout time.Duration) *egressTransports {
	return &egressTransports{base: base, deployment: deployment, targets: targets, timeout: timeout, byKey: map[[32]byte]*list.Element{}}
}

// RoundTrip sends req through its outbound path.
func (t *egressTransports) RoundTrip(req *http.Request) (*http.Response, error) {
	e, _ := req.Context().Value(egressKey{}).(endpointEgress)
	if e.isZero() && t.deployment == nil {
		return t.base.RoundTrip(req)
	}
	tr, err := t.transport(e)
	if err != nil {
		return nil, err
	}
	return tr.RoundTrip(req)
}

func (t *egressTransports) transport(e endpointEgress) (*http.Transport, error) {
	k := e.key()
	t.mu.Lock()
	if el, ok := t.byKey[k]; ok {
		t.order.MoveToFront(el)
		t.mu.Unlock()
		return el.Value.(*egressEntry).tr, nil
	}
	t.mu.Unlock()
	tr, err := t.build(e)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.byKey[k]; ok { // built meanwhile by another request: keep one
		tr.CloseIdleConnections()
		return el.Value.(*egressEntry).tr, nil
	}
	t.byKey[k] = t.order.PushFront(&egressEntry{key: k, tr: tr})
	for t.order.Len() > maxEgressTransports {
		last := t.order.Back()
		t.order.Remove(last)
		delete(t.byKey, last.Value.(*egressEntry).key)
		last.Value.(*egressEntry).tr.CloseIdleConnections()
	}
	return tr, nil
}

// build derives the transport of one outbound path from the sender's.
func (t *egressTransports) build(e endpointEgress) (*http.Transport, error) {
	tr := t.base.Clone()
	if e.certPEM != "" || e.caPEM != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if e.certPEM != "" {
			cert, err := tls.X509KeyPair([]byte(e.certPEM), []byte(e.keyPEM))
			if err != nil {
				return nil, fmt.Errorf("client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		if e.caPEM != "" {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM([]byte(e.caPEM)) {
				return nil, errors.New("CA bundle: no certificate")
			}
			cfg.RootCAs = pool
		}
		tr.TLSClientConfig = cfg
	}
	switch {
	case e.proxy != "":
		proxy, err := url.Parse(e.proxy)
		if err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
		// An endpoint's proxy is the tenant's choice: reaching it passes the guard like a target.
		tr.DialContext = t.targets.ConnectDial(proxyAddr(proxy), t.targets.DialContext(t.timeout))
	case t.deployment != nil:
		// The deployment's proxy is the operator's, typically on a private network: dialed as set.
		plain := &net.Dialer{Timeout: t.timeout, KeepAlive: 30 * time.Second}
		tr.DialContext = t.targets.ConnectDial(proxyAddr(t.deployment), plain.DialContext)
		if u := t.deployment.User; u != nil {
			tr.DialContext = t.targets.ConnectDialAuth(proxyAddr(t.deployment), plain.DialContext, egress.ProxyAuthorization(u))
		}
	}
	return tr, nil
}

// proxyAddr is a proxy URL's host:port, 80 when it names none.
func proxyAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// maxPEMBytes bounds a client certificate chain, its key or a CA bundle.
const maxPEMBytes = 64 << 10

// EgressInput is a new endpoint's outbound path: its proxy and its mTLS material ("" = none each).
// A certificate and its key come together.
type EgressInput struct {
	ProxyURL             string
	TLSClientCertificate string
	TLSClientKey         string
	TLSCABundle          string
}

// EgressPatch changes an endpoint's outbound path; nil leaves a field as it is, "" removes it. A new
// certificate comes with its key, and removing one removes both.
type EgressPatch struct {
	ProxyURL             *string
	TLSClientCertificate *string
	TLSClientKey         *string
	TLSCABundle          *string
}

func (in EgressInput) validate(v *apperr.Validator, targets egress.Policy) {
	p := EgressPatch{ProxyURL: &in.ProxyURL, TLSClientCertificate: &in.TLSClientCertificate, TLSClientKey: &in.TLSClientKey,
		TLSCABundle: &in.TLSCABundle}
	p.validate(v, targets)
}

func (p EgressPatch) validate(v *apperr.Validator, targets egress.Policy) {
	if p.ProxyURL != nil && *p.ProxyURL != "" {
		checkErr(v, "proxy_url", validateProxyURL(*p.ProxyURL, targets))
	}
	cert, key := deref(p.TLSClientCertificate), deref(p.TLSClientKey)
	switch {
	case (p.TLSClientCertificate == nil) != (p.TLSClientKey == nil):
		missing := "tls_client_key"
		if p.TLSClientCertificate == nil {
			missing = "tls_client_certificate"
		}
		v.Check(false, missing, "must be given together with tls_client_certificate and tls_client_key (\"\" in both removes them)")
	case (cert == "") != (key == ""):
		missing := "tls_client_key"
		if cert == "" {
			missing = "tls_client_certificate"
		}
		v.Check(false, missing, "must not be empty: a client certificate needs its key (\"\" in both removes them)")
	case cert != "":
		if err := validateClientCertificate(cert); err != nil {
			checkErr(v, "tls_client_certificate", err)
		} else if err := validateClientKey(cert, key); err != nil {
			checkErr(v, "tls_client_key", err)
		}
	}
	if p.TLSCABundle != nil && *p.TLSCABundle != "" {
		checkErr(v, "tls_ca_bundle", validateCABundle(*p.TLSCABundle))
	}
}

// validateProxyURL accepts an endpoint's CONNECT proxy: http://host:port, without user information
// (it would be stored readable), and not a literal non-public address unless allowed, like a target.
func validateProxyURL(raw string, targets egress.Policy) error {
	if err := validateTargetURL(raw, targets); err != nil {
		return err
	}
	_, err := ParseEgressProxy(raw)
	return err
}

func validateClientCertificate(certPEM string) error {
	if len(certPEM) > maxPEMBytes {
		return fmt.Errorf("must be at most %d bytes", maxPEMBytes)
	}
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		return errors.New("must be a PEM certificate (-----BEGIN CERTIFICATE-----), optionally followed by its chain")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return fmt.Errorf("cannot be parsed: %w", err)
	}
	return nil
}

func validateClientKey(certPEM, keyPEM string) error {
	if len(keyPEM) > maxPEMBytes {
		return fmt.Errorf("must be at most %d bytes", maxPEMBytes)
	}
	if _, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM)); err != nil {
		return fmt.Errorf("must be the PEM private key of tls_client_certificate: %w", err)
	}
	return nil
}

func validateCABundle(caPEM string) error {
	if len(caPEM) > maxPEMBytes {
		return fmt.Errorf("must be at most %d bytes", maxPEMBytes)
	}
	if !x509.NewCertPool().AppendCertsFromPEM([]byte(caPEM)) {
		return errors.New("must hold at least one PEM certificate")
	}
	return nil
}

func tlsKeyAAD(id uuid.UUID) string {
	return "webhook_subscriptions/" + id.String() + "/tls_client_key"
}

// setEgress stores a validated outbound path; the key is sealed.
func (s *Subscription) setEgress(in EgressInput, seal sealer) error {
	return s.patchEgress(EgressPatch{ProxyURL: &in.ProxyURL, TLSClientCertificate: &in.TLSClientCertificate,
		TLSClientKey: &in.TLSClientKey, TLSCABundle: &in.TLSCABundle}, seal)
}

func (s *Subscription) patchEgress(p EgressPatch, seal sealer) error {
	if p.ProxyURL != nil {
		s.ProxyURL = *p.ProxyURL
	}
	if p.TLSCABundle != nil {
		s.TLSCABundle = *p.TLSCABundle
	}
	if p.TLSClientCertificate != nil {
		s.TLSClientCertificate, s.TLSClientKey = *p.TLSClientCertificate, ""
		if *p.TLSClientKey != "" {
			sealed, err := seal.box.Seal(*p.TLSClientKey, tlsKeyAAD(s.ID))
			if err != nil {
				return err
			}
			s.TLSClientKey = sealed
		}
	}
	return nil
}

// egressContext carries the subscription's outbound path to the sender (withEgress), its key opened.
func (s *Service) egressContext(ctx context.Context, sub *Subscription) (context.Context, error) {
	e := endpointEgress{proxy: sub.ProxyURL, certPEM: sub.TLSClientCertificate, caPEM: sub.TLSCABundle}
	if sub.TLSClientKey != "" {
		key, err := s.sealer.box.Open(sub.TLSClientKey, tlsKeyAAD(sub.ID))
		if err != nil {
			return ctx, fmt.Errorf("subscription %s: TLS client key: %w", sub.ID, err)
		}
		e.keyPEM = key
	}
	return withEgress(ctx, e), nil
}
