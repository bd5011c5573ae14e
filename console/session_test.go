package console_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// webClient is a browser without JavaScript: a cookie jar, no redirects followed.
type webClient struct {
	t    testing.TB
	http *http.Client
}

func newWebClient(t testing.TB) *webClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &webClient{t: t, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (w *webClient) send(method, target string, form url.Values, headers ...string) page {
	w.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(context.Background(), method, target, body)
	if err != nil {
		w.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := w.http.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (p page) csrf(t testing.TB) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF field in the page:\n%s", p.body)
	}
	return m[1]
}

// signIn signs in on base and returns the Set-Cookie of the session.
func (w *webClient) signIn(base, token string, headers ...string) *http.Cookie {
	w.t.Helper()
	form := w.send(http.MethodGet, base+"/console/sign-in", nil, headers...)
	res := w.send(http.MethodPost, base+"/console/sign-in", url.Values{"csrf": {form.csrf(w.t)}, "token": {token}}, headers...)
	if res.status != http.StatusSeeOther {
		w.t.Fatalf("sign-in answered %d:\n%s", res.status, res.body)
	}
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		if c.Name == "keelson_console" {
			return c
		}
	}
	w.t.Fatal("sign-in set no session cookie")
	return nil
}

func TestAPostWithoutTheCsrfTokenIsRefusedAndChangesNothing(t *testing.T) {
	c := startCluster(t)
	rc := newReceiver(t, http.StatusInternalServerError)
	subscribe(t, c.a, rc.URL+"/hooks", "")
	publish(t, c.a, map[string]any{"n": 1})
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=failed")) == 1 }, "failed")
	d := deliveries(t, c.a, "status=failed")[0]

	w := newWebClient(t)
	if res := w.send(http.MethodPost, c.a.URL+"/console/sign-in", url.Values{"token": {hosttest.Token}}); res.status != http.StatusForbidden {
		t.Fatalf("a sign-in without its form token answered %d", res.status)
	}
	w.signIn(c.a.URL, hosttest.Token)
	detail := w.send(http.MethodGet, c.a.URL+"/console/deliveries/"+d.ID, nil)
	if detail.status != http.StatusOK {
		t.Fatalf("delivery page: %d", detail.status)
	}
	target := c.b.URL + "/console/deliveries/" + d.ID + "/redeliver"
	for name, form := range map[string]url.Values{
		"no token":    {"version": {d.Version}},
		"wrong token": {"version": {d.Version}, "csrf": {otherFirstByte(detail.csrf(t))}},
		"empty token": {"version": {d.Version}, "csrf": {""}},
	} {
		res := w.send(http.MethodPost, target, form)
		if res.status != http.StatusForbidden || !strings.Contains(res.body, "security token") {
			t.Fatalf("%s: answered %d", name, res.status)
		}
	}
	if after := deliveries(t, c.a, "status=failed")[0]; after.Version != d.Version || after.AttemptCount != d.AttemptCount {
		t.Fatalf("a refused form changed the delivery: %+v → %+v", d, after)
	}
	if res := w.send(http.MethodPost, target, url.Values{"version": {d.Version}, "csrf": {detail.csrf(t)}}); res.status != http.StatusSeeOther {
		t.Fatalf("the same form with its token answered %d", res.status)
	}
}

func TestASessionKeepsNoReadableTokenWorksOnEveryReplicaAndEndsEverywhereAtSignOut(t *testing.T) {
	c := startCluster(t)
	w := newWebClient(t)
	cookie := w.signIn(c.a.URL, hosttest.Token)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Secure || cookie.Path != "/console" || cookie.MaxAge <= 0 {
		t.Fatalf("session cookie %+v", cookie)
	}
	if strings.Contains(cookie.Value, hosttest.Token) {
		t.Fatal("the cookie carries the token")
	}
	db := c.db.Open(t)
	var rows int
	var sealed []byte
	if err := db.SQL().QueryRow(`SELECT count(*) OVER (), sealed_token FROM console_sessions`).Scan(&rows, &sealed); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || bytes.Contains(sealed, []byte(hosttest.Token)) {
		t.Fatalf("%d session rows; token in the row: %v", rows, bytes.Contains(sealed, []byte(hosttest.Token)))
	}

	page := w.send(http.MethodGet, c.b.URL+"/console/endpoints", nil)
	if page.status != http.StatusOK {
		t.Fatalf("replica b answered %d to a's session", page.status)
	}
	if res := w.send(http.MethodPost, c.b.URL+"/console/sign-out", url.Values{"csrf": {page.csrf(t)}}); res.status != http.StatusSeeOther {
		t.Fatalf("sign-out answered %d", res.status)
	}
	// The browser's cookie is gone; a copy of it (a stolen one) must not work either, on any replica.
	thief := newWebClient(t)
	u, _ := url.Parse(c.a.URL)
	thief.http.Jar.SetCookies(u, []*http.Cookie{{Name: cookie.Name, Value: cookie.Value, Path: "/console"}})
	res := thief.send(http.MethodGet, c.a.URL+"/console/endpoints", nil)
	if res.status != http.StatusSeeOther || !strings.Contains(res.header.Get("Location"), "/console/sign-in") {
		t.Fatalf("a signed-out session answered %d %s", res.status, res.header.Get("Location"))
	}
}

func TestAnExpiredSessionSendsTheBrowserToSignIn(t *testing.T) {
	c := startCluster(t)
	w := newWebClient(t)
	w.signIn(c.a.URL, hosttest.Token)
	if _, err := c.db.Open(t).SQL().Exec(`UPDATE console_sessions SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	res := w.send(http.MethodGet, c.a.URL+"/console/deliveries", nil)
	if res.status != http.StatusSeeOther || !strings.HasPrefix(res.header.Get("Location"), "/console/sign-in") {
		t.Fatalf("expired session answered %d %s", res.status, res.header.Get("Location"))
	}
}

func TestATokenTheApiRefusesCannotSignIn(t *testing.T) {
	c := startCluster(t)
	w := newWebClient(t)
	form := w.send(http.MethodGet, c.a.URL+"/console/sign-in", nil)
	res := w.send(http.MethodPost, c.a.URL+"/console/sign-in", url.Values{"csrf": {form.csrf(t)}, "token": {"not-a-token"}})
	if res.status != http.StatusUnauthorized || !strings.Contains(res.body, "not accepted") {
		t.Fatalf("answered %d:\n%s", res.status, res.body)
	}
}

func TestBehindTlsTheCookieIsSecureAndEveryPageForbidsInlineScriptAndFraming(t *testing.T) {
	c := startCluster(t)
	w := newWebClient(t)
	if cookie := w.signIn(c.a.URL, hosttest.Token, "X-Forwarded-Proto", "https"); !cookie.Secure {
		t.Fatal("the session cookie is not Secure behind TLS")
	}
	// The jar keeps a Secure cookie off plain http; sign in again without the proxy header.
	w = newWebClient(t)
	w.signIn(c.a.URL, hosttest.Token)
	inline := regexp.MustCompile(`(?i)<script>|<script[^>]*>[^<]|\son[a-z]+=|\sstyle=|javascript:`)
	for _, path := range []string{"/console/sign-in", "/console/endpoints", "/console/deliveries", "/console/conversations"} {
		p := w.send(http.MethodGet, c.a.URL+path, nil)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d", path, p.status)
		}
		csp := p.header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "default-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Fatalf("%s: CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Fatalf("%s: CSP allows inline code", path)
		}
		if m := inline.FindString(p.body); m != "" {
			t.Fatalf("%s holds inline code: %q", path, m)
		}
	}
}

var formKeyInput = regexp.MustCompile(`name="form_key" value="([^"]+)"`)

func TestAMessageFormSentTwiceHasTheEffectTheApiGivesOneIdempotencyKey(t *testing.T) {
	c := startCluster(t)
	// What the API does with one key sent twice, straight.
	direct := hosttest.Decode[created](t, c.a.Do(t, http.MethodPost, "/api/v1/conversations", map[string]any{"title": "direct"}))
	for range 2 {
		c.a.Do(t, http.MethodPost, "/api/v1/conversations/"+direct.ID+"/messages", map[string]any{"content": "hello"},
			"Idempotency-Key", "direct-key-0123456789")
	}
	viaConsole := hosttest.Decode[created](t, c.a.Do(t, http.MethodPost, "/api/v1/conversations", map[string]any{"title": "console"}))

	w := newWebClient(t)
	w.signIn(c.a.URL, hosttest.Token)
	p := w.send(http.MethodGet, c.a.URL+"/console/conversations/"+viaConsole.ID, nil)
	key := formKeyInput.FindStringSubmatch(p.body)
	if key == nil {
		t.Fatal("the message form carries no form key")
	}
	for range 2 {
		res := w.send(http.MethodPost, c.a.URL+"/console/conversations/"+viaConsole.ID+"/messages",
			url.Values{"csrf": {p.csrf(t)}, "form_key": {key[1]}, "content": {"hello"}})
		if res.status != http.StatusSeeOther {
			t.Fatalf("posting answered %d:\n%s", res.status, res.body)
		}
	}
	// Only the user's messages count: the assistant replies on its own time.
	users := func(id string) int {
		n := 0
		for _, m := range hosttest.Decode[struct {
			Items []struct {
				Role string `json:"role"`
			} `json:"items"`
		}](t, c.a.Do(t, http.MethodGet, "/api/v1/conversations/"+id+"/messages?limit=200", nil)).Items {
			if m.Role == "user" {
				n++
			}
		}
		return n
	}
	if got, want := users(viaConsole.ID), users(direct.ID); got != want {
		t.Fatalf("the form sent twice made %d messages; the API with one key makes %d", got, want)
	}
	if other := formKeyInput.FindAllStringSubmatch(w.send(http.MethodGet, c.a.URL+"/console/conversations/"+viaConsole.ID, nil).body, -1); len(other) == 0 || other[0][1] == key[1] {
		t.Fatal("a new page view must give its form a new key")
	}
}

// otherFirstByte is token with its first byte changed: a token that differs from it for sure.
func otherFirstByte(token string) string {
	if token[0] == 'x' {
		return "y" + token[1:]
	}
	return "x" + token[1:]
}
