package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelson/keelson/console"
	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/conversations"
	"github.com/keelson/keelson/modules/proposals"
	"github.com/keelson/keelson/modules/webhooks"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/module"
)

// testLinkKey signs the test replicas' portal links.
const testLinkKey = "portal-link-key-of-the-console-tests-0123456789"

// cluster is two replicas of every module with the console on, on one database and broker.
type cluster struct {
	db   *dbtest.Database
	a, b *hosttest.Replica
}

func testModules(t testing.TB) []module.Module {
	t.Helper()
	wh, err := webhooks.New(webhooks.Config{
		AllowPrivateTargets: true,
		SendTimeout:         2 * time.Second,
		ClaimLease:          time.Minute,
		SweepInterval:       50 * time.Millisecond,
		RetrySchedule:       []time.Duration{20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := conversations.New(conversations.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return []module.Module{wh, conv, proposals.New()}
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	db := dbtest.Create(t, migrations.Sets("webhooks", "conversations", "proposals")...)
	bus := hosttest.Broker()
	start := func() *hosttest.Replica {
		return hosttest.Start(t, db.Open(t), hosttest.Options{Messaging: bus, Background: true, Pages: []host.Pages{console.New(console.Options{PortalLinkKeys: []string{testLinkKey}})}}, testModules(t)...)
	}
	return &cluster{db: db, a: start(), b: start()}
}

// receiver answers every webhook with the status it is set to.
type receiver struct {
	*httptest.Server
	status atomic.Int32
	hits   atomic.Int32
}

func newReceiver(t testing.TB, status int) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.status.Store(int32(status))
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.hits.Add(1)
		w.WriteHeader(int(rc.status.Load()))
		_, _ = w.Write([]byte("receiver says <b>no</b>"))
	}))
	t.Cleanup(rc.Close)
	return rc
}

// chromiumPath finds Debian's chromium (or CHROMIUM_PATH); .ci/run installs it when missing.
func chromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: install Debian's chromium package (apt-get install chromium) or set CHROMIUM_PATH")
	return ""
}

// newBrowser starts a headless Chromium for the test, with a phone-sized viewport when width is small.
func newBrowser(t *testing.T, width, height int64) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// do runs browser steps or fails the test.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// submit clicks a form button and waits for the page the form leads to.
func submit(t *testing.T, ctx context.Context, sel string) int64 {
	t.Helper()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("browser: submit %s: %v", sel, err)
	}
	return resp.Status
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return s
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("browser: %s: %v", js, err)
	}
	return v
}

// signIn signs the browser in on replica r with the test token.
func signIn(t *testing.T, ctx context.Context, r *hosttest.Replica) {
	t.Helper()
	signInWith(t, ctx, r, hosttest.Token)
}

func signInWith(t *testing.T, ctx context.Context, r *hosttest.Replica, token string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(r.URL+"/console/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token))
	submit(t, ctx, "#sign-in")
	if loc := location(t, ctx); !strings.HasSuffix(loc, "/console/endpoints") {
		t.Fatalf("after sign-in the browser is at %s", loc)
	}
}

func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// reloadUntil reloads the page until cond holds in it.
func reloadUntil(t *testing.T, ctx context.Context, timeout time.Duration, js, what string) {
	t.Helper()
	hosttest.Eventually(t, timeout, func() bool {
		if _, err := chromedp.RunResponse(ctx, chromedp.Reload()); err != nil {
			t.Fatalf("browser: reload: %v", err)
		}
		return eval[bool](t, ctx, js)
	}, "%s", what)
}
