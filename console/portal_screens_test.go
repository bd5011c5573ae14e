package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelson/keelson/platform/host/hosttest"
)

// a11yProblemsJS lists what automated checks can find wrong with a page's accessibility: the WCAG
// rules that need no judgement (language, landmarks, one h1 and no skipped heading level, a label
// for every field, a name for every link, button and image, unique ids, references that resolve,
// no positive tabindex) and the contrast of every visible text (lowContrastJS). It is not axe-core,
// which no package source this project uses ships; it covers the subset of axe's rules listed here.
const a11yProblemsJS = `(() => {
  const out = [];
  const name = e => (e.getAttribute("aria-label") || e.textContent || e.getAttribute("title") || e.value || "").trim();
  if (!document.documentElement.lang) out.push("html has no lang");
  if (document.querySelectorAll("main").length !== 1) out.push("not exactly one main landmark");
  document.querySelectorAll("nav").forEach(n => { if (!n.getAttribute("aria-label") && !n.getAttribute("aria-labelledby")) out.push("nav without a name"); });
  const h1 = document.querySelectorAll("h1");
  if (h1.length !== 1) out.push(h1.length + " h1 elements");
  let level = 0;
  document.querySelectorAll("h1, h2, h3, h4, h5, h6").forEach(h => {
    const l = Number(h.tagName[1]);
    if (level && l > level + 1) out.push("heading level skipped before " + h.tagName + " " + h.textContent.trim().slice(0, 20));
    level = l;
  });
  document.querySelectorAll("input:not([type=hidden]), select, textarea").forEach(e => {
    if (!(e.labels && e.labels.length) && !e.getAttribute("aria-label")) out.push("field without a label: " + (e.name || e.id));
  });
  document.querySelectorAll("a[href], button").forEach(e => {
    if (!e.hidden && e.getClientRects().length && !name(e)) out.push("unnamed " + e.tagName.toLowerCase() + " " + e.outerHTML.slice(0, 40));
  });
  document.querySelectorAll("img, svg[role=img]").forEach(e => {
    if (!e.getAttribute("alt") && !e.getAttribute("aria-label") && !e.querySelector("title")) out.push("image without a name");
  });
  const ids = {};
  document.querySelectorAll("[id]").forEach(e => { if (ids[e.id]) out.push("duplicate id " + e.id); ids[e.id] = true; });
  document.querySelectorAll("[aria-describedby], [aria-labelledby], label[for]").forEach(e => {
    const refs = (e.getAttribute("aria-describedby") || "") + " " + (e.getAttribute("aria-labelledby") || "") + " " + (e.getAttribute("for") || "");
    refs.split(/\s+/).filter(Boolean).forEach(id => { if (!document.getElementById(id)) out.push("reference to missing #" + id); });
  });
  document.querySelectorAll("[tabindex]").forEach(e => { if (Number(e.getAttribute("tabindex")) > 0) out.push("positive tabindex"); });
  return out.concat(` + lowContrastJS + `.map(s => "low contrast: " + s));
})()`

func TestThePortalsPagesFitA320PxPhonePassTheAccessibilityChecksAndArePhotographed(t *testing.T) {
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	c := startCluster(t)
	acme := tenantWith(t, c.a, "acme")
	ok, down := newReceiver(t, http.StatusNoContent), newReceiver(t, http.StatusServiceUnavailable)
	shop := subscribeAs(t, c.a, acme, ok.URL+"/hooks/orders", "order.*")
	subscribeAs(t, c.a, acme, down.URL+"/hooks/billing", "order.paid")
	for i := range 12 {
		res := c.a.Do(t, http.MethodPost, "/api/v1/webhooks/events", map[string]any{"type": []string{"order.created", "order.paid"}[i%2],
			"data": map[string]any{"order_id": 1000 + i, "total": fmt.Sprintf("%d.90", 10+i)}}, "Authorization", "Bearer "+acme)
		if res.Status != http.StatusAccepted {
			t.Fatalf("publish: %d %s", res.Status, res.Body)
		}
	}
	hosttest.Eventually(t, 60*time.Second, func() bool {
		return len(deliveriesAs(t, c.a, acme, "status=pending&limit=200")) == 0 && len(deliveriesAs(t, c.a, acme, "limit=200")) == 18
	}, "every delivery finished")
	db := c.db.Open(t).SQL()
	// Spread the deliveries and attempts over the last day so the hourly charts show a day.
	for _, q := range []string{
		`WITH ranked AS (SELECT id, row_number() OVER (ORDER BY id DESC) AS n FROM webhook_deliveries)
		 UPDATE webhook_deliveries d SET created_at = now() - (r.n * interval '97 minutes'),
			updated_at = now() - (r.n * interval '97 minutes') + interval '2 seconds' FROM ranked r WHERE r.id = d.id`,
		`UPDATE webhook_attempts a SET started_at = d.created_at + a.number * interval '1 second'
		 FROM webhook_deliveries d WHERE d.id = a.delivery_id`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	link := mintLink(t, c.a, acme, map[string]any{"name": "Acme Ltd", "event_types": []string{"order.*"}})
	one := deliveriesAs(t, c.a, acme, "limit=1")
	if len(one) == 0 {
		t.Fatal("no delivery")
	}
	revoked := mintLink(t, c.a, acme, map[string]any{})
	c.a.Do(t, http.MethodPost, "/api/v1/portal/links/"+revoked.ID+"/revoke", nil, "Authorization", "Bearer "+acme)

	type shot struct {
		name, path string
		act        func(t *testing.T, ctx context.Context)
	}
	shots := []shot{
		{name: "open", path: link.URL},
		{name: "endpoints", path: "/console/endpoints"},
		{name: "endpoint", path: "/console/endpoints/" + shop.ID},
		{name: "new-endpoint", path: "/console/endpoints/new", act: func(t *testing.T, ctx context.Context) {
			fill(t, ctx, "url", "http://")
			fill(t, ctx, "event_types", "invoice.*")
			submit(t, ctx, "#save-endpoint")
		}},
		{name: "deliveries", path: "/console/deliveries"},
		{name: "delivery", path: "/console/deliveries/" + one[0].ID},
		{name: "replay", path: "/console/deliveries?status=failed", act: func(t *testing.T, ctx context.Context) { submit(t, ctx, "#replay-filtered") }},
		{name: "event-types", path: "/console/event-types"},
		{name: "refused", path: revoked.URL},
	}
	for _, size := range []struct {
		suffix        string
		width, height int64
	}{{"", 1280, 800}, {"-phone", 375, 800}, {"-small", 320, 640}} {
		ctx := newBrowser(t, size.width, size.height)
		for _, s := range shots {
			do(t, ctx, chromedp.Navigate(c.a.URL+s.path), chromedp.WaitReady(chromedp.CSS("main")))
			if s.act != nil {
				s.act(t, ctx)
			}
			if wide := eval[int](t, ctx, `document.documentElement.scrollWidth`); wide > int(size.width) {
				t.Errorf("portal %s at %d px is %d px wide", s.name, size.width, wide)
			}
			if problems := eval[[]string](t, ctx, a11yProblemsJS); len(problems) > 0 {
				t.Errorf("portal %s at %d px: %v", s.name, size.width, problems)
			}
			if s.name == "event-types" && size.suffix == "" {
				// The checks themselves must see a fault: an unlabelled field, an unnamed button, a pale text.
				do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const d = document.createElement("div"); d.id = "probe";
					d.innerHTML = '<input name="probe-field"><button></button><p>pale probe</p>';
					d.querySelector("p").style.color = "#aaaaaa"; d.querySelector("p").style.background = "#ffffff";
					document.querySelector("main").append(d); })()`))
				found := strings.Join(eval[[]string](t, ctx, a11yProblemsJS), "; ")
				for _, want := range []string{"field without a label: probe-field", "unnamed button", "low contrast: pale probe"} {
					if !strings.Contains(found, want) {
						t.Errorf("the accessibility checks missed %q: %s", want, found)
					}
				}
				do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("probe").remove()`))
			}
			if size.suffix != "-small" {
				capture := chromedp.FullScreenshot(100)
				if size.width < 500 {
					capture = chromedp.CaptureScreenshot()
				}
				png, err := chromedp.Run(ctx, capture)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "portal-"+s.name+size.suffix+".png"), png, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if s.name == "open" {
				submit(t, ctx, "#open-portal")
			}
		}
		if !strings.Contains(text(t, ctx, "main"), "revoked") {
			t.Error("the revoked link's page does not say it was revoked")
		}
	}
}

func deliveriesAs(t testing.TB, r *hosttest.Replica, token, query string) []deliveryItem {
	t.Helper()
	resp := r.Do(t, http.MethodGet, "/api/v1/webhooks/deliveries?"+query, nil, "Authorization", "Bearer "+token)
	if resp.Status != http.StatusOK {
		t.Fatalf("deliveries: %d %s", resp.Status, resp.Body)
	}
	return hosttest.Decode[struct {
		Items []deliveryItem `json:"items"`
	}](t, resp).Items
}
