package console_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// selfSigned is a client certificate and its key in PEM, as a customer would paste them.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

func TestTheEndpointFormSetsAFilterATransformationAProxyAndMTLSWithTheAPIsRefusalsBesideEachField(t *testing.T) {
	c := startCluster(t)
	w := newWebClient(t)
	w.signIn(c.a.URL, hosttest.Token)
	certPEM, keyPEM := selfSigned(t, "acme")
	_, otherKey := selfSigned(t, "other")

	form := w.send(http.MethodGet, c.a.URL+"/console/endpoints/new", nil)
	for _, id := range []string{`id="filter"`, `id="transform"`, `id="proxy_url"`, `id="tls_client_certificate"`, `id="tls_client_key"`, `id="tls_ca_bundle"`} {
		if !strings.Contains(form.body, id) {
			t.Fatalf("the new endpoint form has no %s", id)
		}
	}
	post := func(page page, target string, fields url.Values) page {
		fields.Set("csrf", page.csrf(t))
		if key := formKeyInput.FindStringSubmatch(page.body); key != nil {
			fields.Set("form_key", key[1])
		}
		return w.send(http.MethodPost, target, fields)
	}
	res := post(form, c.a.URL+"/console/endpoints", url.Values{"url": {"https://example.com/hooks"}, "event_types": {"order.*"},
		"filter": {"data.amount >"}, "transform": {`{"a": dta}`}, "proxy_url": {"https://proxy.example:3128"},
		"tls_client_certificate": {certPEM}, "tls_client_key": {otherKey}})
	if res.status != http.StatusUnprocessableEntity {
		t.Fatalf("refused fields answered %d:\n%s", res.status, res.body)
	}
	for _, want := range []string{`id="filter-error"`, "Line 1, column 14", `id="transform-error"`, "undeclared reference to &#39;dta&#39;",
		`id="proxy_url-error"`, `id="tls_client_key-error"`} {
		if !strings.Contains(res.body, want) {
			t.Fatalf("the refused form lacks %s:\n%s", want, res.body)
		}
	}
	if strings.Contains(res.body, "PRIVATE KEY") {
		t.Fatal("the refused form shows the private key again")
	}
	if !strings.Contains(res.body, "data.amount &gt;") {
		t.Fatal("the refused form lost the filter as typed")
	}

	res = post(res, c.a.URL+"/console/endpoints", url.Values{"url": {"https://example.com/hooks"}, "event_types": {"order.*"},
		"filter": {`data.amount > 100 && data.currency == "EUR"`}, "transform": {`{"total": data.amount}`},
		"proxy_url": {"http://proxy.example:3128"}, "tls_client_certificate": {certPEM}, "tls_client_key": {keyPEM}, "tls_ca_bundle": {certPEM}})
	if res.status != http.StatusCreated {
		t.Fatalf("create answered %d:\n%s", res.status, res.body)
	}
	for _, want := range []string{"data.amount &gt; 100 &amp;&amp; data.currency == &#34;EUR&#34;", `{&#34;total&#34;: data.amount}`,
		"http://proxy.example:3128", "client certificate presented; own CA bundle"} {
		if !strings.Contains(res.body, want) {
			t.Fatalf("the endpoint page lacks %s:\n%s", want, res.body)
		}
	}
	subs := hosttest.Decode[struct {
		Items []struct {
			ID, Filter, Transform string
			ProxyURL              string `json:"proxy_url"`
			Cert                  string `json:"tls_client_certificate"`
		} `json:"items"`
	}](t, c.b.Do(t, http.MethodGet, "/api/v1/webhooks/subscriptions", nil)).Items
	if len(subs) != 1 || subs[0].Filter != `data.amount > 100 && data.currency == "EUR"` || subs[0].Transform != `{"total": data.amount}` ||
		subs[0].ProxyURL != "http://proxy.example:3128" || subs[0].Cert != strings.TrimSpace(certPEM) {
		t.Fatalf("the other replica reads %+v", subs)
	}
	id := subs[0].ID

	edit := w.send(http.MethodGet, c.a.URL+"/console/endpoints/"+id+"/edit", nil)
	if edit.status != http.StatusOK || strings.Contains(edit.body, "PRIVATE KEY") || !strings.Contains(edit.body, `id="clear_client_certificate"`) {
		t.Fatalf("the edit form answered %d, showing the key or without the removal:\n%s", edit.status, edit.body)
	}
	version := regexpVersion(t, edit.body)
	// Another certificate without its key is refused beside the key's field; the current key stays.
	newCert, _ := selfSigned(t, "acme-2")
	res = post(edit, c.a.URL+"/console/endpoints/"+id+"/edit", url.Values{"version": {version}, "url": {"https://example.com/hooks"},
		"event_types": {"order.*"}, "tls_client_certificate": {newCert}, "tls_ca_bundle": {certPEM}})
	if res.status != http.StatusUnprocessableEntity || !strings.Contains(res.body, `id="tls_client_key-error"`) {
		t.Fatalf("a certificate without its key answered %d:\n%s", res.status, res.body)
	}
	// Emptied fields remove the filter, the transformation and the proxy; the box removes the certificate.
	res = post(edit, c.a.URL+"/console/endpoints/"+id+"/edit", url.Values{"version": {version}, "url": {"https://example.com/hooks"},
		"event_types": {"order.*"}, "tls_client_certificate": {certPEM}, "clear_client_certificate": {"on"}})
	if res.status != http.StatusSeeOther {
		t.Fatalf("the edit answered %d:\n%s", res.status, res.body)
	}
	got := hosttest.Decode[map[string]any](t, c.b.Do(t, http.MethodGet, "/api/v1/webhooks/subscriptions/"+id, nil))
	for _, field := range []string{"filter", "transform", "proxy_url", "tls_client_certificate", "tls_ca_bundle"} {
		if got[field] != "" {
			t.Fatalf("%s is %q after it was emptied", field, got[field])
		}
	}
}

func regexpVersion(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `name="version" value="`)
	if !ok {
		t.Fatalf("no version in the form:\n%s", body)
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
