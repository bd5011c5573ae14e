// Package console serves the web console at /console/: server-rendered pages over the replica's own
// JSON API, called in-process with the signed-in user's token. Sessions live in PostgreSQL, so any
// replica serves any session; the token is stored only sealed under a key that the cookie alone holds.
package console

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/correlation"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/host"
	"github.com/keelson/keelson/platform/jobs"
)

// Prefix is where the console is served.
const Prefix = "/console"

// DefaultSessionTTL is how long a sign-in lasts when Options.SessionTTL is zero.
const DefaultSessionTTL = 8 * time.Hour

const (
	sessionCookie = "keelson_console"
	signInCookie  = "keelson_console_signin" // double-submit token of the sign-in form, before any session
	csrfField     = "csrf"
)

// contentSecurityPolicy allows the console's own stylesheet and script and nothing inline or foreign.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed static
var staticFiles embed.FS

// Options are the console's own settings; the rest comes from the replica it is mounted on.
type Options struct {
	// SessionTTL is how long a sign-in lasts; zero means DefaultSessionTTL.
	SessionTTL time.Duration
	// PortalLinkKeys sign portal links (PORTAL_LINK_KEY): the first signs, every one verifies; none = no links.
	PortalLinkKeys []string
	// PortalPublicURL starts every portal link (PORTAL_PUBLIC_URL); "" = links are paths.
	PortalPublicURL string
	// PortalFrameAncestors may frame portal sessions (PORTAL_FRAME_ANCESTORS); none = no framing.
	PortalFrameAncestors []string
}

// Console is the web console, served by a replica as its host.Pages.
type Console struct {
	opts     Options
	api      *api
	auth     *auth.Authenticator
	links    *Links
	sessions *sessionStore
	views    *views
	logger   *slog.Logger
}

var _ host.Pages = (*Console)(nil)

// New returns the console; the replica mounts it through host.Options.Pages.
func New(opts Options) *Console {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	return &Console{opts: opts}
}

// Schedules prunes expired sessions.
func (c *Console) Schedules(db *database.DB) []jobs.Schedule {
	return []jobs.Schedule{PruneSessions(db.SQL())}
}

// Mount adds the console's routes under /console to the replica's engine, after the modules' routes.
func (c *Console) Mount(env host.PageEnv) error {
	if env.Engine == nil || env.DB == nil || env.Logger == nil {
		return errors.New("console: Engine, DB and Logger are required")
	}
	v, err := loadViews()
	if err != nil {
		return err
	}
	c.api = &api{engine: env.Engine, declared: env.API}
	c.auth = env.Auth
	if env.Tokens == nil || env.Auth == nil || env.API == nil {
		return errors.New("console: API, Auth and Tokens are required")
	}
	if c.links, err = NewLinks(env.DB, env.Tokens, c.opts.PortalLinkKeys, c.opts.PortalPublicURL); err != nil {
		return err
	}
	mountPortalAPI(env.API, c.links)
	c.sessions = &sessionStore{db: env.DB.SQL(), ttl: c.opts.SessionTTL}
	c.views = v
	c.logger = env.Logger.With("component", "console")
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return err
	}
	engine := env.Engine
	engine.GET(Prefix, func(g *gin.Context) { g.Redirect(http.StatusFound, Prefix+"/") })
	root := engine.Group(Prefix, securityHeaders)
	root.StaticFS("/static", http.FS(static))
	root.GET("/", func(g *gin.Context) { g.Redirect(http.StatusFound, Prefix+"/endpoints") })
	root.GET("/sign-in", c.signInPage)
	root.POST("/sign-in", c.signIn)
	root.GET("/portal/:link", c.portalFramed, c.portalPage)
	root.POST("/portal/:link", c.portalFramed, c.openPortal)
	root.GET("/portal-ended", c.portalFramed, c.portalEnded)

	in := root.Group("", c.requireSession)
	in.POST("/sign-out", c.handle(c.signOut))
	in.GET("/endpoints", c.handle(c.endpoints))
	in.POST("/endpoints", c.handle(c.createEndpoint))
	in.GET("/endpoints/new", c.handle(c.newEndpoint))
	in.GET("/endpoints/:id", c.handle(c.endpoint))
	in.GET("/endpoints/:id/edit", c.handle(c.editEndpoint))
	in.POST("/endpoints/:id/:action", c.handle(c.endpointAction))
	in.GET("/deliveries", c.handle(c.deliveries))
	in.GET("/deliveries/:id", c.handle(c.delivery))
	in.POST("/deliveries/:id/redeliver", c.handle(c.redeliver))
	in.POST("/deliveries/replay", c.handle(c.replay))
	in.POST("/deliveries/recover", c.handle(c.recoverFailed))
	in.GET("/event-types", c.handle(c.eventTypes))
	in.GET("/conversations", c.handle(c.conversations))
	in.POST("/conversations", c.handle(c.createConversation))
	in.GET("/conversations/:id", c.handle(c.conversation))
	in.POST("/conversations/:id/messages", c.handle(c.postMessage))
	in.POST("/proposals/:id/:decision", c.handle(c.decide))
	return nil
}

// PruneSessions deletes expired sessions; expired ones are refused anyway, this only keeps the table small.
func PruneSessions(db *sql.DB) jobs.Schedule {
	store := &sessionStore{db: db}
	return jobs.Schedule{Name: "console.prune_sessions", Interval: time.Hour, Run: func(ctx context.Context) error {
		_, err := store.prune(ctx)
		return err
	}}
}

func securityHeaders(g *gin.Context) {
	h := g.Writer.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store") // pages show secrets and private data
	g.Next()
}

// secure says whether the browser reached us over TLS, directly or through a proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func setCookie(g *gin.Context, name, value string, maxAge int) {
	setCookieFor(g, name, value, maxAge, false)
}

// setCookieFor sets a console cookie: HttpOnly, SameSite=Strict, Secure over TLS. A framed portal's
// cookie is SameSite=None (partitioned) instead: a Strict cookie is never sent inside another site's
// iframe; browsers take None only with Secure, so over plain HTTP it stays Strict.
func setCookieFor(g *gin.Context, name, value string, maxAge int, framed bool) {
	sameSite := http.SameSiteStrictMode
	if framed && secure(g.Request) {
		sameSite = http.SameSiteNoneMode
	}
	//nolint:gosec // Secure follows the request: set behind TLS, left off on plain HTTP where the browser would drop it.
	http.SetCookie(g.Writer, &http.Cookie{
		Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, Secure: secure(g.Request), SameSite: sameSite,
		Partitioned: sameSite == http.SameSiteNoneMode,
	})
}

const sessionKey = "console.session"

// requireSession opens the session of the cookie or sends the browser to the sign-in page, and
// refuses any POST whose form does not carry the session's CSRF token.
func (c *Console) requireSession(g *gin.Context) {
	cookie, err := g.Cookie(sessionCookie)
	var s session
	if err == nil {
		s, err = c.sessions.open(g.Request.Context(), cookie)
	}
	if errors.Is(err, errPortalEnded) {
		setCookieFor(g, sessionCookie, "", -1, c.framable())
		g.Redirect(http.StatusSeeOther, Prefix+"/portal-ended?why=revoked")
		g.Abort()
		return
	}
	if err != nil {
		if !errors.Is(err, errNoSession) && !errors.Is(err, http.ErrNoCookie) {
			c.fail(g, http.StatusServiceUnavailable, "The console cannot reach its database right now. Try again in a moment.", err)
			g.Abort()
			return
		}
		if g.Request.Method == http.MethodGet {
			g.Redirect(http.StatusSeeOther, Prefix+"/sign-in?next="+url.QueryEscape(g.Request.URL.RequestURI()))
		} else {
			g.Redirect(http.StatusSeeOther, Prefix+"/sign-in?notice=expired")
		}
		g.Abort()
		return
	}
	if g.Request.Method == http.MethodPost && !sameToken(g.PostForm(csrfField), s.CSRF) {
		c.render(g, http.StatusForbidden, "error", page{Title: "Refused", Session: &s,
			Error: "This form was refused: it did not carry this console's security token. Reload the page and try again."})
		g.Abort()
		return
	}
	if c.auth != nil {
		p, err := c.auth.Authenticate(g.Request.Context(), s.Token)
		switch {
		case errors.Is(err, auth.ErrUnauthenticated):
			c.endRevoked(g, s)
			g.Abort()
			return
		case err == nil:
			s.scopes = p.Scopes
		}
		// A disabled tenant or an unreachable database: the API's own answer explains it on the page.
	}
	if s.Portal != nil {
		c.frameHeaders(g)
	}
	g.Set(sessionKey, s)
	g.Next()
}

// handle runs a page handler with the session and turns the API's answers into pages.
func (c *Console) handle(fn func(g *gin.Context, s session) error) gin.HandlerFunc {
	return func(g *gin.Context) {
		s := g.MustGet(sessionKey).(session)
		err := fn(g, s)
		if err == nil {
			return
		}
		var ae *apiError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
			c.endRevoked(g, s)
		case errors.As(err, &ae) && ae.Status == http.StatusForbidden:
			c.render(g, http.StatusForbidden, "error", page{Title: "Not allowed", Session: &s,
				Error: "Your token may not do this. " + ae.Error()})
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
			c.render(g, http.StatusNotFound, "error", page{Title: "Not found", Session: &s,
				Error: "There is nothing here, or your token may not see it."})
		case errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests:
			// A page asks the API several times; an issued token's rate limit counts each ask.
			c.render(g, http.StatusTooManyRequests, "error", page{Title: "Slow down", Session: &s,
				Error: "The API is limiting how fast this token may ask. Wait a few seconds and reload."})
		case errors.As(err, &ae) && ae.Status < 500:
			c.render(g, ae.Status, "error", page{Title: "Refused", Session: &s, Error: "The API refused this: " + ae.Error()})
		default:
			c.fail(g, http.StatusBadGateway, "Something went wrong while asking the API. Try again in a moment.", err)
		}
	}
}

// fail logs err and shows a page that does not reveal it.
func (c *Console) fail(g *gin.Context, status int, message string, err error) {
	c.logger.ErrorContext(g.Request.Context(), "console page failed", "error", err,
		"path", g.Request.URL.Path, "request_id", correlation.ID(g.Request.Context()))
	var s *session
	if v, ok := g.Get(sessionKey); ok {
		sv := v.(session)
		s = &sv
	}
	c.render(g, status, "error", page{Title: "Error", Session: s, Error: message})
}

// back redirects to a console page after a form, with a notice or error code the page turns into text.
func back(g *gin.Context, path, param, code string) error {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	g.Redirect(http.StatusSeeOther, Prefix+path+sep+param+"="+url.QueryEscape(code))
	return nil
}

// conflicted reports whether err is the API saying the version shown is no longer current.
func conflicted(err error) bool {
	s := statusOf(err)
	return s == http.StatusConflict || s == http.StatusPreconditionFailed
}

// endRevoked ends a session whose token was revoked or expired since sign-in, and sends the browser
// to sign in again.
func (c *Console) endRevoked(g *gin.Context, s session) {
	_ = c.sessions.end(g.Request.Context(), s.ID)
	if s.Portal != nil {
		setCookieFor(g, sessionCookie, "", -1, c.framable())
		g.Redirect(http.StatusSeeOther, Prefix+"/portal-ended?why=revoked")
		return
	}
	setCookie(g, sessionCookie, "", -1)
	g.Redirect(http.StatusSeeOther, Prefix+"/sign-in?notice=token")
}
