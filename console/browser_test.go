package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelson/keelson/platform/host/hosttest"
)

type created struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

type deliveryItem struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	AttemptCount int    `json:"attempt_count"`
	Version      string `json:"version"`
}

func subscribe(t testing.TB, r *hosttest.Replica, url, description string) created {
	t.Helper()
	resp := r.Do(t, http.MethodPost, "/api/v1/webhooks/subscriptions",
		map[string]any{"url": url, "event_types": []string{"order.*"}, "description": description})
	if resp.Status != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", resp.Status, resp.Body)
	}
	return hosttest.Decode[created](t, resp)
}

func publish(t testing.TB, r *hosttest.Replica, data map[string]any) {
	t.Helper()
	resp := r.Do(t, http.MethodPost, "/api/v1/webhooks/events", map[string]any{"type": "order.created", "data": data})
	if resp.Status != http.StatusAccepted {
		t.Fatalf("publish: %d %s", resp.Status, resp.Body)
	}
}

func deliveries(t testing.TB, r *hosttest.Replica, query string) []deliveryItem {
	t.Helper()
	resp := r.Do(t, http.MethodGet, "/api/v1/webhooks/deliveries?"+query, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("deliveries: %d %s", resp.Status, resp.Body)
	}
	return hosttest.Decode[struct {
		Items []deliveryItem `json:"items"`
	}](t, resp).Items
}

func TestAPersonFindsAFailedDeliveryRedeliversItAndSeesTheNewAttemptOnAnotherReplica(t *testing.T) {
	c := startCluster(t)
	rc := newReceiver(t, http.StatusInternalServerError)
	subscribe(t, c.a, rc.URL+"/hooks", "orders of the shop")
	publish(t, c.a, map[string]any{"order_id": 42})
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=failed")) == 1 },
		"the delivery fails after its two attempts")

	ctx := newBrowser(t, 1280, 900)
	signIn(t, ctx, c.a)

	// The session opened on replica a is good on replica b: it lives in PostgreSQL.
	do(t, ctx, chromedp.Navigate(c.b.URL+"/console/deliveries"), chromedp.WaitVisible(chromedp.ID("f-status")),
		chromedp.SetValue(chromedp.ID("f-status"), "failed"))
	submit(t, ctx, "#apply-filters")
	if rows := eval[int](t, ctx, `document.querySelectorAll("#deliveries tr.delivery.failed").length`); rows != 1 {
		t.Fatalf("the failed filter shows %d rows, want 1", rows)
	}
	submit(t, ctx, "#deliveries tr.delivery a")
	if got := text(t, ctx, "#delivery-status"); got != "failed" {
		t.Fatalf("delivery status %q", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#attempts li.attempt").length`); n != 2 {
		t.Fatalf("%d attempts shown, want 2", n)
	}
	if payload := text(t, ctx, "#payload"); !strings.Contains(payload, `"order_id": 42`) {
		t.Fatalf("payload not pretty-printed: %q", payload)
	}

	rc.status.Store(http.StatusNoContent)
	if status := submit(t, ctx, "#redeliver"); status != http.StatusOK {
		t.Fatalf("redeliver answered %d", status)
	}
	if notice := text(t, ctx, ".flash.notice"); !strings.Contains(notice, "Redelivery requested") {
		t.Fatalf("notice %q", notice)
	}
	reloadUntil(t, ctx, 30*time.Second,
		`document.querySelectorAll("#attempts li.attempt").length === 3 && document.getElementById("delivery-status").textContent === "succeeded"`,
		"the third attempt shows after reload, and it succeeded")
}

func TestARedeliverOfAVersionThatChangedSinceThePageLoadedReadsReload(t *testing.T) {
	c := startCluster(t)
	rc := newReceiver(t, http.StatusInternalServerError)
	subscribe(t, c.a, rc.URL+"/hooks", "")
	publish(t, c.a, map[string]any{"order_id": 7})
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=failed")) == 1 },
		"the delivery fails")
	d := deliveries(t, c.a, "status=failed")[0]

	ctx := newBrowser(t, 1280, 900)
	signIn(t, ctx, c.a)
	do(t, ctx, chromedp.Navigate(c.a.URL+"/console/deliveries/"+d.ID), chromedp.WaitVisible(chromedp.ID("redeliver")))

	// Someone else redelivers it through the API while the page is open.
	if resp := c.b.Do(t, http.MethodPost, "/api/v1/webhooks/deliveries/"+d.ID+"/redeliver", nil); resp.Status != http.StatusAccepted {
		t.Fatalf("redeliver through the API: %d %s", resp.Status, resp.Body)
	}
	submit(t, ctx, "#redeliver")
	msg := text(t, ctx, ".flash.error")
	if !strings.Contains(msg, "changed since you loaded it") || !strings.Contains(msg, "reload") {
		t.Fatalf("stale redeliver shows %q", msg)
	}
	if got := eval[string](t, ctx, `document.getElementById("delivery-version").textContent`); got == d.Version {
		t.Fatal("the page after the conflict still shows the stale version")
	}
}

func TestARenamePostedFromThePageIsProposedAcceptedAndApplied(t *testing.T) {
	c := startCluster(t)
	resp := c.a.Do(t, http.MethodPost, "/api/v1/conversations", map[string]any{"title": "Before"})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create conversation: %d %s", resp.Status, resp.Body)
	}
	conv := hosttest.Decode[created](t, resp)

	ctx := newBrowser(t, 375, 800)
	signIn(t, ctx, c.a)
	do(t, ctx, chromedp.Navigate(c.b.URL+"/console/conversations/"+conv.ID), chromedp.WaitVisible(chromedp.ID("content")),
		chromedp.SendKeys(chromedp.ID("content"), "/rename Shipped orders"))
	submit(t, ctx, "#post-message")
	if notice := text(t, ctx, ".flash.notice"); !strings.Contains(notice, "Message posted") {
		t.Fatalf("notice %q", notice)
	}
	reloadUntil(t, ctx, 30*time.Second, `document.querySelectorAll(".proposal button.accept").length === 1`,
		"the assistant's rename proposal shows with an Accept button")
	submit(t, ctx, ".proposal button.accept")
	if notice := text(t, ctx, ".flash.notice"); !strings.Contains(notice, "Proposal accepted") {
		t.Fatalf("notice %q", notice)
	}
	reloadUntil(t, ctx, 30*time.Second, `document.getElementById("conversation-title").textContent === "Shipped orders"`,
		"the conversation is renamed")
}

func TestTheLoserOfARaceToDecideAProposalReadsAlreadyDecided(t *testing.T) {
	c := startCluster(t)
	conv := hosttest.Decode[created](t, c.a.Do(t, http.MethodPost, "/api/v1/conversations", map[string]any{"title": "Race"}))
	c.a.Do(t, http.MethodPost, "/api/v1/conversations/"+conv.ID+"/messages", map[string]any{"content": "/rename Raced"})
	var proposalID string
	hosttest.Eventually(t, 30*time.Second, func() bool {
		items := hosttest.Decode[struct {
			Items []created `json:"items"`
		}](t, c.a.Do(t, http.MethodGet, "/api/v1/assistant/proposals?status=pending&conversation_id="+conv.ID, nil)).Items
		if len(items) == 1 {
			proposalID = items[0].ID
		}
		return proposalID != ""
	}, "the proposal is made")

	ctx := newBrowser(t, 1280, 900)
	signIn(t, ctx, c.a)
	do(t, ctx, chromedp.Navigate(c.a.URL+"/console/conversations/"+conv.ID), chromedp.WaitVisible(chromedp.CSS(".proposal button.reject")))
	if resp := c.b.Do(t, http.MethodPost, "/api/v1/assistant/proposals/"+proposalID+"/accept", nil); resp.Status != http.StatusOK {
		t.Fatalf("accept through the API: %d %s", resp.Status, resp.Body)
	}
	submit(t, ctx, ".proposal button.reject")
	if msg := text(t, ctx, ".flash.error"); !strings.Contains(msg, "already decided") {
		t.Fatalf("the loser reads %q", msg)
	}
}

// hostile is markup that runs script if any page forgets to escape it.
const hostile = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`

func TestScriptInAPayloadADescriptionAndAMessageRunsNothing(t *testing.T) {
	c := startCluster(t)
	rc := newReceiver(t, http.StatusNoContent)
	sub := subscribe(t, c.a, rc.URL+"/hooks", hostile)
	publish(t, c.a, map[string]any{"note": hostile})
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=succeeded")) == 1 }, "delivered")
	d := deliveries(t, c.a, "")[0]
	conv := hosttest.Decode[created](t, c.a.Do(t, http.MethodPost, "/api/v1/conversations", map[string]any{"title": hostile}))
	c.a.Do(t, http.MethodPost, "/api/v1/conversations/"+conv.ID+"/messages", map[string]any{"content": hostile})

	ctx := newBrowser(t, 1280, 900)
	signIn(t, ctx, c.a)
	// Each page and whether it shows the hostile text itself (the deliveries list shows no payload).
	pages := []struct {
		path  string
		shows bool
	}{{"/console/endpoints", true}, {"/console/endpoints/" + sub.ID, true}, {"/console/deliveries", false},
		{"/console/deliveries/" + d.ID, true}, {"/console/conversations", true}, {"/console/conversations/" + conv.ID, true}}
	for _, p := range pages {
		path := p.path
		do(t, ctx, chromedp.Navigate(c.a.URL+path), chromedp.WaitReady(chromedp.CSS("main")))
		if pwned := eval[bool](t, ctx, `window.__pwned !== undefined`); pwned {
			t.Fatalf("%s ran injected script", path)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll("img, main script, [onerror]").length`); n != 0 {
			t.Fatalf("%s holds %d injected elements", path, n)
		}
		if p.shows && !strings.Contains(eval[string](t, ctx, `document.querySelector("main").textContent`), "<script>") {
			t.Fatalf("%s does not show the hostile text as text", path)
		}
	}
}

// hasRoute reports whether the replica's API serves method on path (gin syntax, e.g. "/api/v1/x/:id").
func hasRoute(r *hosttest.Replica, method, path string) bool {
	for _, rt := range r.Engine.Routes() {
		if rt.Method == method && rt.Path == path {
			return true
		}
	}
	return false
}

func TestTheEndpointPageOffersExactlyTheActionsTheApiHasAndTheyWork(t *testing.T) {
	c := startCluster(t)
	rc := newReceiver(t, http.StatusNoContent)
	sub := subscribe(t, c.a, rc.URL+"/hooks", "")

	ctx := newBrowser(t, 1280, 900)
	signIn(t, ctx, c.a)
	do(t, ctx, chromedp.Navigate(c.a.URL+"/console/endpoints/"+sub.ID), chromedp.WaitReady(chromedp.CSS("main")))
	route := func(action string) bool {
		return hasRoute(c.a, http.MethodPost, "/api/v1/webhooks/subscriptions/:id/"+action)
	}
	shown := func(id string) bool { return eval[bool](t, ctx, `document.getElementById("`+id+`") !== null`) }
	for action, button := range map[string]string{"pause": "pause", "test": "send-test", "rotate-secret": "rotate-secret", "recover": "recover"} {
		if shown(button) != route(action) {
			t.Errorf("button %s shown: %v; API route %s: %v", button, shown(button), action, route(action))
		}
	}

	if route("rotate-secret") {
		// The confirmation is the script's; a person says yes.
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
		submit(t, ctx, "#rotate-secret")
		secret := eval[string](t, ctx, `document.getElementById("new-secret").value`)
		if !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("the new secret reads %q", secret)
		}
		do(t, ctx, chromedp.Navigate(c.a.URL+"/console/endpoints/"+sub.ID), chromedp.WaitReady(chromedp.CSS("main")))
		if shown("new-secret") {
			t.Fatal("the secret is shown again after the answer that rotated it")
		}
	}
	if route("pause") {
		submit(t, ctx, "#pause")
		if got := text(t, ctx, ".facts .badge"); got != "paused" {
			t.Fatalf("after pause the status reads %q", got)
		}
		submit(t, ctx, "#resume")
		if got := text(t, ctx, ".facts .badge"); got != "active" {
			t.Fatalf("after resume the status reads %q", got)
		}
	}
	if route("test") {
		submit(t, ctx, "#send-test")
		if !strings.Contains(location(t, ctx), "/console/deliveries/") {
			t.Fatalf("send test led to %s", location(t, ctx))
		}
		reloadUntil(t, ctx, 30*time.Second, `document.getElementById("delivery-status").textContent === "succeeded"`,
			"the test event is delivered")
	}
}

// tabTo presses Tab until the element with id has the focus, and fails after limit presses.
func tabTo(t *testing.T, ctx context.Context, id string, limit int) {
	t.Helper()
	for range limit {
		do(t, ctx, chromedp.KeyEvent("\t"))
		if eval[string](t, ctx, `document.activeElement ? document.activeElement.id : ""`) == id {
			return
		}
	}
	t.Fatalf("#%s not reached with %d presses of Tab", id, limit)
}

func TestAPersonSignsInAndRedeliversWithTheKeyboardAloneAndSeesWhereTheFocusIs(t *testing.T) {
	c := startCluster(t)
	rc := newReceiver(t, http.StatusInternalServerError)
	subscribe(t, c.a, rc.URL+"/hooks", "")
	publish(t, c.a, map[string]any{"n": 1})
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=failed")) == 1 }, "failed")
	d := deliveries(t, c.a, "status=failed")[0]

	ctx := newBrowser(t, 375, 800)
	do(t, ctx, chromedp.Navigate(c.a.URL+"/console/deliveries/"+d.ID), chromedp.WaitVisible(chromedp.ID("token")))
	if focused := eval[string](t, ctx, `document.activeElement.id`); focused != "token" {
		t.Fatalf("the sign-in page starts with the focus on %q, not the token field", focused)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.KeyEvent(hosttest.Token+"\r")); err != nil {
		t.Fatal(err)
	}
	if loc := location(t, ctx); !strings.HasSuffix(loc, "/console/deliveries/"+d.ID) {
		t.Fatalf("after sign-in the browser is at %s, not the page it asked for", loc)
	}
	do(t, ctx, chromedp.KeyEvent("\t"))
	if first := eval[string](t, ctx, `document.activeElement.textContent`); first != "Skip to content" {
		t.Fatalf("the first Tab focuses %q", first)
	}
	tabTo(t, ctx, "redeliver", 40)
	if outline := eval[string](t, ctx, `getComputedStyle(document.activeElement).outlineStyle`); outline != "solid" {
		t.Fatalf("the focused button has outline %q", outline)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	if notice := text(t, ctx, ".flash.notice"); !strings.Contains(notice, "Redelivery requested") {
		t.Fatalf("notice %q", notice)
	}
}

func TestAReadOnlyTokenSeesEndpointsAndDeliveriesWithNoActionAndAForgedActionIsRefused(t *testing.T) {
	c := startCluster(t)
	rc := newReceiver(t, http.StatusInternalServerError)
	sub := subscribe(t, c.a, rc.URL+"/hooks", "watched, not touched")
	publish(t, c.a, map[string]any{"order_id": 7})
	hosttest.Eventually(t, 30*time.Second, func() bool { return len(deliveries(t, c.a, "status=failed")) == 1 },
		"the delivery fails after its two attempts")
	d := deliveries(t, c.a, "status=failed")[0]
	resp := c.a.Do(t, http.MethodPost, "/api/v1/admin/tokens",
		map[string]any{"name": "viewer", "scopes": []string{"webhooks:read", "conversations:read"}})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create the viewer's token: %d %s", resp.Status, resp.Body)
	}
	viewer := hosttest.Decode[struct{ Token string }](t, resp).Token

	ctx := newBrowser(t, 1280, 900)
	signInWith(t, ctx, c.a, viewer)
	do(t, ctx, chromedp.Navigate(c.a.URL+"/console/endpoints/"+sub.ID), chromedp.WaitReady(chromedp.CSS("main")))
	if main := text(t, ctx, "main"); !strings.Contains(main, "watched, not touched") {
		t.Fatalf("the endpoint page does not show the endpoint: %.300s", main)
	}
	for _, button := range []string{"pause", "resume", "send-test", "rotate-secret", "recover"} {
		if eval[bool](t, ctx, `document.getElementById("`+button+`") !== null`) {
			t.Errorf("a webhooks:read token is offered %s", button)
		}
	}
	do(t, ctx, chromedp.Navigate(c.a.URL+"/console/deliveries/"+d.ID), chromedp.WaitVisible(chromedp.ID("delivery-status")))
	if eval[bool](t, ctx, `document.getElementById("redeliver") !== null`) {
		t.Error("a webhooks:read token is offered Redeliver")
	}

	// A form the page did not offer, with the session's own CSRF token: the API refuses it.
	forged := `(() => { const f = document.createElement("form"); f.method = "post";
		f.action = "/console/deliveries/` + d.ID + `/redeliver";
		const csrf = document.createElement("input"); csrf.name = "csrf";
		csrf.value = document.querySelector("input[name=csrf]").value; f.appendChild(csrf);
		const b = document.createElement("button"); b.id = "forged"; f.appendChild(b);
		document.body.appendChild(f); return true })()`
	eval[bool](t, ctx, forged)
	if status := submit(t, ctx, "#forged"); status != http.StatusForbidden {
		t.Fatalf("the forged redeliver answered %d, want 403", status)
	}
	if msg := text(t, ctx, "main"); !strings.Contains(msg, "Your token may not do this") {
		t.Fatalf("the refusal reads %.300s", msg)
	}
	after := deliveries(t, c.a, "status=failed")
	if len(after) != 1 || after[0].ID != d.ID || after[0].AttemptCount != d.AttemptCount || after[0].Version != d.Version {
		t.Fatalf("the refused redeliver changed the delivery: %+v", after)
	}
}
