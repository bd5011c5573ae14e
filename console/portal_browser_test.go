package console_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelson/keelson/console"
	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/webhooks"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// recorder keeps every request a receiver was sent.
type hookRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	got  []*http.Request
	body [][]byte
}

func newHookRecorder(t testing.TB) *hookRecorder {
	t.Helper()
	rec := &hookRecorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.got, rec.body = append(rec.got, r), append(rec.body, raw)
		rec.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *hookRecorder) requests() ([]*http.Request, [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.got...), append([][]byte(nil), r.body...)
}

// verifies checks a Standard Webhooks signature as a receiver would: HMAC-SHA256 of id.timestamp.body
// under the secret's key, one of the space-separated v1 signatures.
func verifies(secret string, header http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(header.Get("webhook-id") + "." + header.Get("webhook-timestamp") + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(header.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// openInBrowser opens a portal link in the browser and lands on its endpoints.
func openInBrowser(t *testing.T, ctx context.Context, base, link string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(base+link), chromedp.WaitVisible(chromedp.ID("open-portal")))
	submit(t, ctx, "#open-portal")
	if loc := location(t, ctx); !strings.HasSuffix(loc, "/console/endpoints") {
		t.Fatalf("after opening the link the browser is at %s", loc)
	}
}

// fill replaces a field's value as a person typing would.
func fill(t *testing.T, ctx context.Context, id, value string) {
	t.Helper()
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("`+id+`").value = ""`), chromedp.SendKeys(chromedp.ID(id), value))
}

func TestAnEndpointCreatedInThePortalOnAPhoneReceivesASignedDeliveryThatThePageShowsByItself(t *testing.T) {
	c := startCluster(t)
	acme := tenantWith(t, c.a, "acme")
	rec := newHookRecorder(t)
	link := mintLink(t, c.a, acme, map[string]any{"name": "Acme Ltd", "event_types": []string{"order.*"}})

	ctx := newBrowser(t, 375, 800)
	openInBrowser(t, ctx, c.a.URL, link.URL)
	if got := text(t, ctx, ".brand"); !strings.Contains(got, "Acme Ltd") {
		t.Fatalf("the portal's header reads %q", got)
	}
	submit(t, ctx, "#new-endpoint")
	fill(t, ctx, "url", rec.URL+"/hooks/acme")
	fill(t, ctx, "event_types", "invoice.*")
	fill(t, ctx, "rate_limit", "fast")
	if status := submit(t, ctx, "#save-endpoint"); status != http.StatusUnprocessableEntity {
		t.Fatalf("a form outside the link's event types answered %d", status)
	}
	if got := text(t, ctx, "#event_types-error"); !strings.Contains(got, "order.*") {
		t.Fatalf("the event types refusal reads %q", got)
	}
	if got := text(t, ctx, "#rate_limit-error"); !strings.Contains(got, "number") {
		t.Fatalf("the rate limit refusal reads %q", got)
	}
	if got := eval[string](t, ctx, `document.getElementById("url").value`); got != rec.URL+"/hooks/acme" {
		t.Fatalf("the refused form lost the URL: %q", got)
	}
	fill(t, ctx, "event_types", "order.created")
	fill(t, ctx, "rate_limit", "50")
	fill(t, ctx, "description", "Acme's order hook")
	do(t, ctx, chromedp.SendKeys(chromedp.ID("headers"), "X-Customer: acme"))
	if status := submit(t, ctx, "#save-endpoint"); status != http.StatusCreated {
		t.Fatalf("creating the endpoint answered %d", status)
	}
	secret := eval[string](t, ctx, `document.getElementById("new-secret").value`)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the new endpoint's secret reads %q", secret)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#live-recent tbody tr").length`); n != 0 {
		t.Fatalf("a new endpoint shows %d deliveries", n)
	}

	res := c.a.Do(t, http.MethodPost, "/api/v1/webhooks/events", map[string]any{"type": "order.created", "data": map[string]any{"order_id": 7}},
		"Authorization", "Bearer "+acme)
	if res.Status != http.StatusAccepted {
		t.Fatalf("publish: %d %s", res.Status, res.Body)
	}
	hosttest.Eventually(t, 30*time.Second, func() bool { reqs, _ := rec.requests(); return len(reqs) == 1 }, "the endpoint receives the event")
	reqs, bodies := rec.requests()
	if !verifies(secret, reqs[0].Header, bodies[0]) {
		t.Fatalf("the delivery's signature does not verify with the secret the portal showed: %v", reqs[0].Header)
	}
	if reqs[0].Header.Get("X-Customer") != "acme" {
		t.Fatalf("the custom header was not sent: %v", reqs[0].Header)
	}
	// The page was not reloaded: its live region shows the delivery by itself.
	hosttest.Eventually(t, 20*time.Second, func() bool {
		return eval[int](t, ctx, `document.querySelectorAll("#live-recent tbody tr").length`) == 1
	}, "the endpoint page shows the delivery without a reload (live status %q, hidden %v, %s)",
		eval[string](t, ctx, `document.getElementById("live-status").textContent`), eval[bool](t, ctx, `document.hidden`), eval[string](t, ctx, `typeof live + " " + document.readyState + " " + document.getElementById("live-status").dataset.liveUrl`))
	if got := text(t, ctx, "#live-status"); !strings.Contains(got, "Up to date") && !strings.Contains(got, "Updating") {
		t.Fatalf("the live status reads %q", got)
	}
	if wide := eval[int](t, ctx, `document.documentElement.scrollWidth`); wide > 375 {
		t.Fatalf("the endpoint page is %d px wide on a 375 px phone", wide)
	}

	// Edit, then delete.
	submit(t, ctx, "#edit-endpoint")
	fill(t, ctx, "description", "Acme's renamed hook")
	submit(t, ctx, "#save-endpoint")
	if got := text(t, ctx, ".flash.notice"); !strings.Contains(got, "saved") {
		t.Fatalf("after saving the page reads %q", got)
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
	submit(t, ctx, "#delete-endpoint")
	if got := text(t, ctx, ".flash.notice"); !strings.Contains(got, "deleted") {
		t.Fatalf("after deleting the page reads %q", got)
	}
}

func TestAPrivateAddressInThePortalsFormIsRefusedBesideTheFieldNamingTheSettingThatAllowsIt(t *testing.T) {
	db := dbtest.Create(t, migrations.Sets("webhooks", "conversations", "proposals")...)
	wh, err := webhooks.New(webhooks.Config{SendTimeout: 2 * time.Second, ClaimLease: time.Minute,
		SweepInterval: time.Second, RetrySchedule: []time.Duration{time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	r := hosttest.Start(t, db.Open(t), hosttest.Options{Pages: []host.Pages{console.New(console.Options{PortalLinkKeys: []string{testLinkKey}})}}, wh)
	acme := tenantWith(t, r, "acme")
	link := mintLink(t, r, acme, map[string]any{})
	w := newWebClient(t)
	w.openLink(r.URL, link.URL)
	form := w.send(http.MethodGet, r.URL+"/console/endpoints/new", nil)
	res := w.send(http.MethodPost, r.URL+"/console/endpoints", url.Values{"csrf": {form.csrf(t)},
		"url": {"http://127.0.0.1:9/hooks"}, "event_types": {"order.*"}})
	if res.status != http.StatusUnprocessableEntity || !strings.Contains(res.body, `id="url-error"`) ||
		!strings.Contains(res.body, "WEBHOOKS_ALLOW_PRIVATE_TARGETS") || !strings.Contains(res.body, "WEBHOOKS_ALLOWED_TARGETS") {
		t.Fatalf("a private address answered %d:\n%s", res.status, res.body)
	}
	if n := len(hosttest.Decode[struct {
		Items []created `json:"items"`
	}](t, r.Do(t, http.MethodGet, "/api/v1/webhooks/subscriptions", nil, "Authorization", "Bearer "+acme)).Items); n != 0 {
		t.Fatalf("a refused form created %d endpoints", n)
	}
}

func TestFailedDeliveriesAreReplayedInBulkAfterACountAndAConfirmation(t *testing.T) {
	c := startCluster(t)
	rc := newReceiver(t, http.StatusInternalServerError)
	sub := subscribe(t, c.a, rc.URL+"/hooks", "")
	for i := range 3 {
		publish(t, c.a, map[string]any{"n": i})
	}
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=failed")) == 3 }, "three deliveries fail")
	rc.status.Store(http.StatusNoContent)

	ctx := newBrowser(t, 320, 700)
	signIn(t, ctx, c.a)
	do(t, ctx, chromedp.Navigate(c.a.URL+"/console/deliveries?status=failed&subscription_id="+sub.ID), chromedp.WaitVisible(chromedp.ID("replay-filtered")))
	submit(t, ctx, "#replay-filtered")
	if got := text(t, ctx, "h1"); got != "Replay 3 deliveries?" {
		t.Fatalf("the confirmation reads %q", got)
	}
	if wide := eval[int](t, ctx, `document.documentElement.scrollWidth`); wide > 320 {
		t.Fatalf("the confirmation is %d px wide on a 320 px phone", wide)
	}
	submit(t, ctx, "#confirm-replay")
	if got := text(t, ctx, ".flash.notice"); !strings.Contains(got, "3 deliveries") {
		t.Fatalf("after the replay the page reads %q", got)
	}
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=succeeded")) == 3 }, "the replayed deliveries succeed")
	// The filtered list shows no failed delivery any more, by itself.
	hosttest.Eventually(t, 20*time.Second, func() bool {
		return eval[int](t, ctx, `document.querySelectorAll("#deliveries tr.delivery").length`) == 0
	}, "the list updates by itself")

	rc.status.Store(http.StatusInternalServerError)
	publish(t, c.a, map[string]any{"n": 9})
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=failed")) == 1 }, "a new delivery fails")
	rc.status.Store(http.StatusNoContent)
	do(t, ctx, chromedp.Navigate(c.a.URL+"/console/deliveries"), chromedp.WaitVisible(chromedp.ID("recover-failed")))
	submit(t, ctx, "#recover-failed")
	if got := text(t, ctx, "#replay-summary"); !strings.HasPrefix(got, "1 failed delivery on 1 endpoint") {
		t.Fatalf("the recovery's confirmation reads %q", got)
	}
	submit(t, ctx, "#confirm-recover")
	if got := text(t, ctx, ".flash.notice"); !strings.Contains(got, "1 endpoint") {
		t.Fatalf("after the recovery the page reads %q", got)
	}
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=succeeded")) == 4 }, "the recovered delivery succeeds")
}
