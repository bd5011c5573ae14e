package console

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/modules/webhooks"
)

type signInData struct {
	Next string
}

// safeNext keeps the after-sign-in target inside the console.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, Prefix+"/") || strings.HasPrefix(next, "//") {
		return Prefix + "/endpoints"
	}
	return u.RequestURI()
}

func (c *Console) signInPage(g *gin.Context) {
	c.showSignIn(g, http.StatusOK, "")
}

// showSignIn renders the form with a fresh double-submit token: SameSite keeps other sites' posts
// from carrying the cookie, and the token keeps them from signing a browser into their own account.
func (c *Console) showSignIn(g *gin.Context, status int, errText string) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	token := base64.RawURLEncoding.EncodeToString(raw)
	setCookie(g, signInCookie, token, 600)
	next := g.Query("next")
	if v := g.PostForm("next"); v != "" {
		next = v
	}
	c.render(g, status, "signin", page{Title: "Sign in", Error: errText,
		Session: &session{CSRF: token}, Data: signInData{Next: safeNext(next)}})
}

func (c *Console) signIn(g *gin.Context) {
	cookie, _ := g.Cookie(signInCookie)
	if !sameToken(g.PostForm(csrfField), cookie) {
		c.showSignIn(g, http.StatusForbidden, "The sign-in form was refused: it did not carry this console's security token. Try again.")
		return
	}
	token := strings.TrimSpace(g.PostForm("token"))
	if token == "" {
		c.showSignIn(g, http.StatusUnprocessableEntity, "Enter an API token.")
		return
	}
	// Any answer but 401 means the API knows the token; what it may do is the API's to say page by page.
	err := c.api.do(g.Request, token, call{op: webhooks.OpListSubscriptions,
		query: url.Values{"limit": {"1"}}}, nil)
	if statusOf(err) == http.StatusUnauthorized {
		c.showSignIn(g, http.StatusUnauthorized, "This token is not accepted.")
		return
	}
	if err != nil && statusOf(err) == 0 {
		c.fail(g, http.StatusBadGateway, "The API could not be asked. Try again in a moment.", err)
		return
	}
	_, value, err := c.sessions.create(g.Request.Context(), token)
	if err != nil {
		c.fail(g, http.StatusServiceUnavailable, "The console cannot reach its database right now. Try again in a moment.", err)
		return
	}
	setCookie(g, signInCookie, "", -1)
	setCookie(g, sessionCookie, value, int(c.sessions.ttl.Seconds()))
	g.Redirect(http.StatusSeeOther, safeNext(g.PostForm("next")))
}

func (c *Console) signOut(g *gin.Context, s session) error {
	if err := c.sessions.end(g.Request.Context(), s.ID); err != nil {
		return err
	}
	if s.Portal != nil {
		setCookieFor(g, sessionCookie, "", -1, c.framable())
		g.Redirect(http.StatusSeeOther, Prefix+"/portal-ended?why=left")
		return nil
	}
	setCookie(g, sessionCookie, "", -1)
	g.Redirect(http.StatusSeeOther, Prefix+"/sign-in?notice=signed-out")
	return nil
}
