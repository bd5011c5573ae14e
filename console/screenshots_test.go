package console_test

import (
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

// TestTheMainPagesFitAPhoneAndADesktopAndArePhotographed renders every main page at
// 1280 and 375 px wide, checks nothing overflows sideways, and writes the PNGs into
// $CONSOLE_SCREENSHOTS (make screenshots sets it to docs/images), or a temporary directory.
func TestTheMainPagesFitAPhoneAndADesktopAndArePhotographed(t *testing.T) {
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	c := startCluster(t)
	healthy := newReceiver(t, http.StatusNoContent)
	failing := newReceiver(t, http.StatusServiceUnavailable)
	subscribe(t, c.a, healthy.URL+"/hooks/orders", "Order pipeline of the shop")
	bad := subscribe(t, c.a, failing.URL+"/hooks/billing", "Billing system (down for maintenance)")
	for i := range 24 {
		publish(t, c.a, map[string]any{"order_id": 1000 + i, "total": fmt.Sprintf("%d.90", 10+i), "currency": "EUR"})
	}
	hosttest.Eventually(t, 60*time.Second, func() bool {
		return len(deliveries(t, c.a, "status=pending&limit=200")) == 0
	}, "every delivery finished")
	// Spread the deliveries over the last day, in their order, so the hourly charts show a day.
	if _, err := c.db.Open(t).SQL().Exec(`WITH ranked AS (
			SELECT id, row_number() OVER (ORDER BY id DESC) AS n FROM webhook_deliveries)
		UPDATE webhook_deliveries d SET created_at = now() - (r.n * interval '47 minutes'),
			updated_at = now() - (r.n * interval '47 minutes') + interval '2 seconds'
		FROM ranked r WHERE r.id = d.id`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.Open(t).SQL().Exec(`UPDATE webhook_subscriptions SET created_at = now() - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.Open(t).SQL().Exec(`UPDATE webhook_attempts a SET started_at = d.created_at + a.number * interval '1 second'
		FROM webhook_deliveries d WHERE d.id = a.delivery_id`); err != nil {
		t.Fatal(err)
	}
	failed := deliveries(t, c.a, "status=failed&subscription_id="+bad.ID)[0]

	conv := hosttest.Decode[created](t, c.a.Do(t, http.MethodPost, "/api/v1/conversations", map[string]any{"title": "Order 1042 refund"}))
	c.a.Do(t, http.MethodPost, "/api/v1/conversations/"+conv.ID+"/messages", map[string]any{"content": "The customer asked for a refund of order 1042."})
	c.a.Do(t, http.MethodPost, "/api/v1/conversations/"+conv.ID+"/messages", map[string]any{"content": "/rename Refund for order 1042"})
	hosttest.Eventually(t, 30*time.Second, func() bool {
		return len(hosttest.Decode[struct {
			Items []created `json:"items"`
		}](t, c.a.Do(t, http.MethodGet, "/api/v1/assistant/proposals?status=pending&conversation_id="+conv.ID, nil)).Items) == 1
	}, "the rename is proposed")

	shots := []struct{ name, path string }{
		{"sign-in", "/console/sign-in"},
		{"endpoints", "/console/endpoints"},
		{"endpoint", "/console/endpoints/" + bad.ID},
		{"deliveries", "/console/deliveries"},
		{"delivery", "/console/deliveries/" + failed.ID},
		{"conversation", "/console/conversations/" + conv.ID},
		{"event-types", "/console/event-types"},
	}
	for _, size := range []struct {
		suffix        string
		width, height int64
	}{{"", 1280, 800}, {"-phone", 375, 800}} {
		ctx := newBrowser(t, size.width, size.height)
		for _, s := range shots {
			if s.name == "sign-in" {
				do(t, ctx, chromedp.Navigate(c.a.URL+s.path), chromedp.WaitVisible(chromedp.ID("token")))
			} else {
				do(t, ctx, chromedp.Navigate(c.a.URL+s.path), chromedp.WaitReady(chromedp.CSS("main")))
			}
			if wide := eval[int](t, ctx, `document.documentElement.scrollWidth`); wide > int(size.width) {
				t.Errorf("%s at %d px is %d px wide", s.name, size.width, wide)
			}
			unlabelled := eval[[]string](t, ctx, `[...document.querySelectorAll("input:not([type=hidden]), select, textarea")]
				.filter(e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label")).map(e => e.name || e.id)`)
			if len(unlabelled) > 0 {
				t.Errorf("%s has fields without a label: %v", s.name, unlabelled)
			}
			if low := eval[[]string](t, ctx, lowContrastJS); len(low) > 0 {
				t.Errorf("%s has text below 4.5:1 contrast: %v", s.name, low)
			}
			if s.name == "event-types" {
				// The check itself must see bad contrast: pale grey on white is 2.3:1.
				do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const p = document.createElement("p");
					p.id = "probe"; p.textContent = "pale probe"; p.style.color = "#aaaaaa"; p.style.background = "#ffffff";
					document.querySelector("main").append(p); })()`))
				if low := eval[[]string](t, ctx, lowContrastJS); len(low) != 1 || !strings.HasPrefix(low[0], "pale probe") {
					t.Errorf("the contrast check missed a pale probe: %v", low)
				}
				do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("probe").remove()`))
			}
			if s.name == "event-types" && !strings.Contains(text(t, ctx, "main"), "conversation.renamed") {
				t.Errorf("the catalog page does not list conversation.renamed")
			}
			// A phone shows its first screen; a desktop the whole page.
			shot := chromedp.FullScreenshot(100)
			if size.width < 500 {
				shot = chromedp.CaptureScreenshot()
			}
			png, err := chromedp.Run(ctx, shot)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "console-"+s.name+size.suffix+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
			if s.name == "sign-in" {
				signIn(t, ctx, c.a)
			}
		}
	}
}

// lowContrastJS lists the visible text whose colour against its effective background is below 4.5:1
// (WCAG AA for normal text), as "text (ratio)".
const lowContrastJS = `(() => {
  const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
    .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = el => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el.getClientRects().length || el.closest("svg")) continue;
    const style = getComputedStyle(el);
    if (style.visibility === "hidden") continue;
    const a = lum(rgb(style.color).slice(0, 3)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) out.push(n.textContent.trim().slice(0, 30) + " (" + ratio.toFixed(2) + ")");
  }
  return out;
})()`
