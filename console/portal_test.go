package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/keelson/keelson/console"
	"github.com/keelson/keelson/platform/host"
	"github.com/keelson/keelson/platform/host/hosttest"
)

type portalLink struct {
	ID        string `json:"id"`
	TenantID  string `json:"tenant_id"`
	URL       string `json:"url"`
	ReadOnly  bool   `json:"read_only"`
	ExpiresAt string `json:"expires_at"`
}

// tenantWith creates a tenant and returns an admin-and-webhooks token of it.
func tenantWith(t testing.TB, r *hosttest.Replica, name string) string {
	t.Helper()
	if res := r.Do(t, http.MethodPost, "/api/v1/admin/tenants", map[string]any{"name": name}); res.Status != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", res.Status, res.Body)
	}
	res := r.Do(t, http.MethodPost, "/api/v1/admin/tokens", map[string]any{"tenant": name,
		"scopes": []string{"admin", "webhooks:read", "webhooks:write"}})
	if res.Status != http.StatusCreated {
		t.Fatalf("create token: %d %s", res.Status, res.Body)
	}
	return hosttest.Decode[struct {
		Token string `json:"token"`
	}](t, res).Token
}

func subscribeAs(t testing.TB, r *hosttest.Replica, token, target string, types ...string) created {
	t.Helper()
	if len(types) == 0 {
		types = []string{"order.*"}
	}
	res := r.Do(t, http.MethodPost, "/api/v1/webhooks/subscriptions",
		map[string]any{"url": target, "event_types": types}, "Authorization", "Bearer "+token)
	if res.Status != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", res.Status, res.Body)
	}
	return hosttest.Decode[created](t, res)
}

func mintLink(t testing.TB, r *hosttest.Replica, token string, body map[string]any) portalLink {
	t.Helper()
	res := r.Do(t, http.MethodPost, "/api/v1/portal/links", body, "Authorization", "Bearer "+token)
	if res.Status != http.StatusCreated {
		t.Fatalf("mint link: %d %s", res.Status, res.Body)
	}
	return hosttest.Decode[portalLink](t, res)
}

// openLink opens a portal link as a browser without JavaScript would: the page, then its button.
func (w *webClient) openLink(base, link string) page {
	w.t.Helper()
	target := base + link
	form := w.send(http.MethodGet, target, nil)
	if form.status != http.StatusOK {
		return form
	}
	return w.send(http.MethodPost, target, url.Values{"csrf": {form.csrf(w.t)}})
}

func TestAPortalLinkOfOneTenantShowsAndTouchesOnlyThatTenantsEndpoints(t *testing.T) {
	c := startCluster(t)
	acme, globex := tenantWith(t, c.a, "acme"), tenantWith(t, c.a, "globex")
	rc := newReceiver(t, http.StatusNoContent)
	mine := subscribeAs(t, c.a, acme, rc.URL+"/acme")
	theirs := subscribeAs(t, c.a, globex, rc.URL+"/globex")

	link := mintLink(t, c.a, acme, map[string]any{"name": "Acme Ltd"})
	if !strings.HasPrefix(link.URL, "/console/portal/") {
		t.Fatalf("link URL %q", link.URL)
	}
	w := newWebClient(t)
	if res := w.openLink(c.b.URL, link.URL); res.status != http.StatusSeeOther || res.header.Get("Location") != "/console/endpoints" {
		t.Fatalf("opening the link answered %d %s", res.status, res.header.Get("Location"))
	}
	list := w.send(http.MethodGet, c.a.URL+"/console/endpoints", nil)
	if list.status != http.StatusOK || !strings.Contains(list.body, "/acme") || strings.Contains(list.body, "/globex") {
		t.Fatalf("the portal's endpoints (%d) show the wrong tenant:\n%s", list.status, list.body)
	}
	if strings.Contains(list.body, "/console/conversations") {
		t.Fatal("a portal offers conversations")
	}
	if res := w.send(http.MethodGet, c.a.URL+"/console/endpoints/"+theirs.ID, nil); res.status != http.StatusNotFound {
		t.Fatalf("another tenant's endpoint answered %d", res.status)
	}
	own := w.send(http.MethodGet, c.a.URL+"/console/endpoints/"+mine.ID, nil)
	if own.status != http.StatusOK {
		t.Fatalf("own endpoint: %d", own.status)
	}
	for _, action := range []string{"pause", "delete", "rotate-secret"} {
		res := w.send(http.MethodPost, c.a.URL+"/console/endpoints/"+theirs.ID+"/"+action,
			url.Values{"csrf": {own.csrf(t)}, "version": {theirs.Version}})
		if res.status != http.StatusNotFound {
			t.Fatalf("%s of another tenant's endpoint answered %d", action, res.status)
		}
	}
	after := c.a.Do(t, http.MethodGet, "/api/v1/webhooks/subscriptions/"+theirs.ID, nil, "Authorization", "Bearer "+globex)
	if after.Status != http.StatusOK || hosttest.Decode[created](t, after).Version != theirs.Version {
		t.Fatalf("another tenant's endpoint changed: %d %s", after.Status, after.Body)
	}
	// Nor can a tenant's admin mint a link into another tenant.
	res := c.a.Do(t, http.MethodPost, "/api/v1/portal/links", map[string]any{"tenant": "globex"}, "Authorization", "Bearer "+acme)
	if res.Status != http.StatusNotFound {
		t.Fatalf("a link into another tenant answered %d %s", res.Status, res.Body)
	}
}

func TestAnExpiredARevokedATamperedAndAUsedOnceLinkAreRefused(t *testing.T) {
	c := startCluster(t)
	acme := tenantWith(t, c.a, "acme")
	w := newWebClient(t)

	good := mintLink(t, c.a, acme, map[string]any{})
	tampered := []byte(good.URL)
	last := len(tampered) - 2
	tampered[last] = map[bool]byte{true: 'B', false: 'A'}[tampered[last] == 'A']
	if res := w.send(http.MethodGet, c.a.URL+string(tampered), nil); res.status != http.StatusNotFound || !strings.Contains(res.body, "not valid") {
		t.Fatalf("a tampered link answered %d", res.status)
	}
	if res := w.send(http.MethodGet, c.a.URL+"/console/portal/not-a-link", nil); res.status != http.StatusNotFound {
		t.Fatalf("a made-up link answered %d", res.status)
	}

	short := mintLink(t, c.a, acme, map[string]any{"expires_in": "2s"})
	opened := newWebClient(t)
	if res := opened.openLink(c.a.URL, short.URL); res.status != http.StatusSeeOther {
		t.Fatalf("a fresh short link answered %d", res.status)
	}
	hosttest.Eventually(t, 10*time.Second, func() bool {
		return w.send(http.MethodGet, c.a.URL+short.URL, nil).status == http.StatusGone
	}, "the link expires")
	if res := w.send(http.MethodGet, c.a.URL+short.URL, nil); !strings.Contains(res.body, "expired") {
		t.Fatalf("an expired link reads %s", res.body)
	}
	if res := opened.send(http.MethodGet, c.a.URL+"/console/endpoints", nil); res.status != http.StatusSeeOther ||
		!strings.HasPrefix(res.header.Get("Location"), "/console/portal-ended") {
		t.Fatalf("a session of an expired link answered %d %s", res.status, res.header.Get("Location"))
	}

	once := mintLink(t, c.a, acme, map[string]any{"once": true})
	if res := w.openLink(c.a.URL, once.URL); res.status != http.StatusSeeOther {
		t.Fatalf("a once-only link answered %d the first time", res.status)
	}
	if res := newWebClient(t).openLink(c.b.URL, once.URL); res.status != http.StatusGone || !strings.Contains(res.body, "already used") {
		t.Fatalf("a once-only link answered %d the second time", res.status)
	}

	// Revoking ends the live session at its next request, on either replica.
	live := newWebClient(t)
	revoked := mintLink(t, c.a, acme, map[string]any{})
	if res := live.openLink(c.a.URL, revoked.URL); res.status != http.StatusSeeOther {
		t.Fatalf("open: %d", res.status)
	}
	if res := live.send(http.MethodGet, c.b.URL+"/console/endpoints", nil); res.status != http.StatusOK {
		t.Fatalf("the live session answered %d", res.status)
	}
	if res := c.a.Do(t, http.MethodPost, "/api/v1/portal/links/"+revoked.ID+"/revoke", nil, "Authorization", "Bearer "+acme); res.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", res.Status, res.Body)
	}
	if res := live.send(http.MethodGet, c.b.URL+"/console/endpoints", nil); res.status != http.StatusSeeOther ||
		!strings.HasPrefix(res.header.Get("Location"), "/console/portal-ended") {
		t.Fatalf("after revocation the session answered %d %s", res.status, res.header.Get("Location"))
	}
	if res := w.send(http.MethodGet, c.a.URL+revoked.URL, nil); res.status != http.StatusGone || !strings.Contains(res.body, "revoked") {
		t.Fatalf("a revoked link answered %d", res.status)
	}
	listed := c.a.Do(t, http.MethodGet, "/api/v1/portal/links", nil, "Authorization", "Bearer "+acme)
	if listed.Status != http.StatusOK || strings.Contains(string(listed.Body), "/console/portal/") {
		t.Fatalf("the list shows link URLs or failed: %d %s", listed.Status, listed.Body)
	}
}

func TestAReadOnlyLinkShowsNoFormThatChangesAnything(t *testing.T) {
	c := startCluster(t)
	acme := tenantWith(t, c.a, "acme")
	rc := newReceiver(t, http.StatusInternalServerError)
	sub := subscribeAs(t, c.a, acme, rc.URL+"/ro")
	link := mintLink(t, c.a, acme, map[string]any{"read_only": true})
	w := newWebClient(t)
	w.openLink(c.a.URL, link.URL)
	for _, path := range []string{"/console/endpoints", "/console/endpoints/" + sub.ID, "/console/deliveries"} {
		res := w.send(http.MethodGet, c.a.URL+path, nil)
		if res.status != http.StatusOK {
			t.Fatalf("%s: %d", path, res.status)
		}
		forms := strings.Count(res.body, "<form")
		signOut := strings.Count(res.body, `action="/console/sign-out"`)
		filters := strings.Count(res.body, `method="get"`)
		if forms != signOut+filters || strings.Contains(res.body, "New endpoint") {
			t.Fatalf("%s offers a form that changes something to a read-only link:\n%s", path, res.body)
		}
	}
	if res := w.send(http.MethodGet, c.a.URL+"/console/endpoints/new", nil); res.status != http.StatusNotFound {
		t.Fatalf("the new endpoint form answered %d to a read-only link", res.status)
	}
}

func TestAFramedPortalNamesItsAncestorsAndTheOperatorsConsoleStaysUnframable(t *testing.T) {
	c := startCluster(t)
	acme := tenantWith(t, c.a, "acme")
	link := mintLink(t, c.a, acme, map[string]any{})
	w := newWebClient(t)
	res := w.send(http.MethodGet, c.a.URL+link.URL, nil)
	if csp := res.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("without PORTAL_FRAME_ANCESTORS the portal may be framed: %s", csp)
	}
	if res.header.Get("X-Frame-Options") != "DENY" {
		t.Fatal("without PORTAL_FRAME_ANCESTORS the portal lacks X-Frame-Options: DENY")
	}

	wh := testModules(t)
	framed := hosttest.Start(t, c.db.Open(t), hosttest.Options{Pages: []host.Pages{console.New(console.Options{
		PortalLinkKeys: []string{testLinkKey}, PortalFrameAncestors: []string{"https://app.example.com"}})}}, wh...)
	tls := []string{"X-Forwarded-Proto", "https"}
	w = newWebClient(t)
	res = w.send(http.MethodGet, framed.URL+link.URL, nil, tls...)
	if csp := res.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors https://app.example.com") ||
		res.header.Get("X-Frame-Options") != "" {
		t.Fatalf("a framable portal answered CSP %q, X-Frame-Options %q", csp, res.header.Get("X-Frame-Options"))
	}
	if cookie := res.header.Get("Set-Cookie"); !strings.Contains(cookie, "SameSite=None") || !strings.Contains(cookie, "Secure") ||
		!strings.Contains(cookie, "Partitioned") || !strings.Contains(cookie, "HttpOnly") {
		t.Fatalf("a framed portal's cookie over TLS: %s", cookie)
	}
	opened := w.send(http.MethodPost, framed.URL+link.URL, url.Values{"csrf": {res.csrf(t)}}, tls...)
	if cookie := opened.header.Get("Set-Cookie"); opened.status != http.StatusSeeOther || !strings.Contains(cookie, "SameSite=None") {
		t.Fatalf("opening a framed portal: %d %s", opened.status, cookie)
	}
	if res := w.send(http.MethodGet, framed.URL+"/console/sign-in", nil, tls...); !strings.Contains(res.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatal("the operator's sign-in may be framed")
	}
}

func TestTheOverviewCountsNothingOfAnotherTenantAndRefusesAMalformedIdNamingTheField(t *testing.T) {
	c := startCluster(t)
	acme, globex := tenantWith(t, c.a, "acme"), tenantWith(t, c.a, "globex")
	rc := newReceiver(t, http.StatusNoContent)
	theirs := subscribeAs(t, c.a, globex, rc.URL+"/g")
	if res := c.a.Do(t, http.MethodPost, "/api/v1/webhooks/events", map[string]any{"type": "order.created", "data": map[string]any{}},
		"Authorization", "Bearer "+globex); res.Status != http.StatusAccepted {
		t.Fatalf("publish: %d %s", res.Status, res.Body)
	}
	type overview struct {
		Items []struct {
			SubscriptionID string `json:"subscription_id"`
			Succeeded      int    `json:"succeeded"`
		} `json:"items"`
	}
	ask := func(token string) overview {
		res := c.a.Do(t, http.MethodGet, "/api/v1/webhooks/overview?subscription_ids="+theirs.ID, nil, "Authorization", "Bearer "+token)
		if res.Status != http.StatusOK {
			t.Fatalf("overview: %d %s", res.Status, res.Body)
		}
		return hosttest.Decode[overview](t, res)
	}
	hosttest.Eventually(t, 30*time.Second, func() bool { o := ask(globex); return len(o.Items) == 1 && o.Items[0].Succeeded == 1 },
		"the owner's overview counts the delivery")
	if o := ask(acme); len(o.Items) != 1 || o.Items[0].Succeeded != 0 {
		t.Fatalf("another tenant's overview counts %+v", o)
	}
	bad := c.a.Do(t, http.MethodGet, "/api/v1/webhooks/overview?subscription_ids=nope", nil, "Authorization", "Bearer "+acme)
	if bad.Status != http.StatusBadRequest || !strings.Contains(string(bad.Body), "subscription_ids") {
		t.Fatalf("a malformed id answered %d %s", bad.Status, bad.Body)
	}
}
