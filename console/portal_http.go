package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/httpapi"
)

// The portal links' API: admin scope, each tenant's admin tokens see their own tenant's links only,
// the default tenant's admin tokens every tenant's.
const (
	OpCreatePortalLink = "createPortalLink"
	OpListPortalLinks  = "listPortalLinks"
	OpRevokePortalLink = "revokePortalLink"
)

func mountPortalAPI(api *httpapi.API, links *Links) {
	h := portalHandlers{links: links}
	g := api.Module("/portal", "portal").Scopes(auth.Admin, auth.Admin)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/links", ID: OpCreatePortalLink,
		Summary: "Mint a signed, expiring portal link that opens the console for one tenant's customer, optionally narrowed to event types, read-only, or good for one opening; the answer is the only place its URL is shown. Without PORTAL_LINK_KEY: 409 portal_not_configured.",
		Status:  http.StatusCreated, Errors: []int{http.StatusNotFound, http.StatusConflict}}, h.create)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/links", ID: OpListPortalLinks,
		Summary: "List portal links (never their URLs), oldest first."}, h.list)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/links/{id}/revoke", ID: OpRevokePortalLink,
		Summary: "Revoke a portal link: it no longer opens, and every session it opened ends at its next request, on every replica."}, h.revoke)
}

type portalHandlers struct{ links *Links }

type createLinkIn struct {
	Body struct {
		Tenant     string   `json:"tenant,omitempty" doc:"tenant name or id; default the caller's. Only the default tenant's admin tokens make links of other tenants."`
		Name       string   `json:"name,omitempty" doc:"who the link is for, shown to them in the portal"`
		EventTypes []string `json:"event_types,omitempty" nullable:"false" doc:"event type patterns the customer may subscribe to and see; absent = every one"`
		ReadOnly   bool     `json:"read_only,omitempty" doc:"the customer sees endpoints and deliveries and changes nothing"`
		Once       bool     `json:"once,omitempty" doc:"the link opens one session only"`
		ExpiresIn  string   `json:"expires_in,omitempty" doc:"how long the link (and any session it opens) lasts: 30m, 24h or 7d; at most 30d; absent = 24h"`
	}
}

type linkOut struct {
	Body PortalLink
}

func principalOf(ctx context.Context) auth.Principal {
	p, _ := auth.From(ctx)
	return p
}

// ownTenant is the tenant whose links the caller manages: its own, or every one (uuid.Nil) for the operator.
func ownTenant(p auth.Principal) uuid.UUID {
	if p.Operator() {
		return uuid.Nil
	}
	return p.TenantID
}

// ParseLinkLifetime reads a link lifetime: a Go duration (24h) or whole days (7d); "" = the default.
func ParseLinkLifetime(raw string) (time.Duration, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return 0, nil
	}
	bad := apperr.Invalid("expires_in", "a duration like 30m or 24h, or days like 7d, at most 30d")
	if days, ok := strings.CutSuffix(raw, "d"); ok {
		d, err := time.ParseDuration(days + "h")
		if err != nil || d <= 0 {
			return 0, bad
		}
		return d * 24, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		return 0, bad
	}
	return d, nil
}

func (h portalHandlers) create(ctx context.Context, in *createLinkIn) (*linkOut, error) {
	p := principalOf(ctx)
	lifetime, err := ParseLinkLifetime(in.Body.ExpiresIn)
	if err != nil {
		return nil, err
	}
	nl := NewPortalLink{Tenant: in.Body.Tenant, Name: in.Body.Name, EventTypes: in.Body.EventTypes,
		ReadOnly: in.Body.ReadOnly, Once: in.Body.Once, ExpiresIn: lifetime, CreatedBy: "token " + p.TokenID}
	if nl.Tenant == "" {
		nl.Tenant = p.TenantID.String()
	}
	if !p.Operator() {
		nl.Within = p.TenantID
	}
	link, err := h.links.Create(ctx, nl)
	if err != nil {
		return nil, err
	}
	return &linkOut{Body: link}, nil
}

type linkIDCursor struct {
	After uuid.UUID `json:"after"`
}

type listLinksIn struct {
	Page httpapi.Page
}

func (h portalHandlers) list(ctx context.Context, in *listLinksIn) (*httpapi.ListOut[PortalLink], error) {
	tenant := ownTenant(principalOf(ctx))
	items, next, err := httpapi.Paginate(in.Page, func(cur linkIDCursor, limit int) ([]PortalLink, error) {
		return h.links.List(ctx, tenant, cur.After, limit)
	}, func(last PortalLink) linkIDCursor { return linkIDCursor{After: last.ID} })
	if err != nil {
		return nil, err
	}
	if items == nil {
		items = []PortalLink{}
	}
	return &httpapi.ListOut[PortalLink]{Body: httpapi.NewList(items, next)}, nil
}

func (h portalHandlers) revoke(ctx context.Context, in *httpapi.ByID) (*linkOut, error) {
	link, err := h.links.Revoke(ctx, ownTenant(principalOf(ctx)), in.ID)
	if err != nil {
		return nil, err
	}
	return &linkOut{Body: link}, nil
}

// framable says whether portal sessions may be framed at all (PORTAL_FRAME_ANCESTORS).
func (c *Console) framable() bool { return len(c.opts.PortalFrameAncestors) > 0 }

// frameHeaders lets the operator's own app frame a portal page: the listed ancestors replace
// frame-ancestors 'none', and X-Frame-Options (which cannot list origins) goes.
func (c *Console) frameHeaders(g *gin.Context) {
	if !c.framable() {
		return
	}
	h := g.Writer.Header()
	h.Set("Content-Security-Policy", strings.Replace(contentSecurityPolicy, "frame-ancestors 'none'",
		"frame-ancestors "+strings.Join(c.opts.PortalFrameAncestors, " "), 1))
	h.Del("X-Frame-Options")
}

// portalFramed applies frameHeaders to the portal's own pages (opening and ended).
func (c *Console) portalFramed(g *gin.Context) {
	c.frameHeaders(g)
	g.Next()
}

const portalOpenCookie = "keelson_portal_open" // double-submit token of the opening form

type portalOpenData struct {
	Link PortalLink
}

// portalPage shows what a link opens and a button to open it: a GET changes nothing, so a link
// previewer or a mail scanner that fetches the link does not use up a once-only link.
func (c *Console) portalPage(g *gin.Context) {
	link, err := c.links.check(g.Request.Context(), g.Param("link"))
	if err != nil {
		c.linkRefused(g, err)
		return
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	token := base64.RawURLEncoding.EncodeToString(raw)
	setCookieFor(g, portalOpenCookie, token, 600, c.framable())
	c.render(g, http.StatusOK, "portal_open", page{Title: "Open the webhook portal", Portal: true,
		Session: &session{CSRF: token}, Data: portalOpenData{Link: link}})
}

// openPortal uses the link: a session for its tenant, with an API token of its rights that ends with
// the session, the link's expiry or its revocation, whichever comes first.
func (c *Console) openPortal(g *gin.Context) {
	cookie, _ := g.Cookie(portalOpenCookie)
	if !sameToken(g.PostForm(csrfField), cookie) {
		c.render(g, http.StatusForbidden, "error", page{Title: "Refused", Portal: true,
			Error: "This form was refused: it did not carry the portal's security token. Open the link again."})
		return
	}
	ctx := g.Request.Context()
	link, err := c.links.open(ctx, g.Param("link"))
	if err != nil {
		c.linkRefused(g, err)
		return
	}
	until := min(time.Until(link.ExpiresAt), c.opts.SessionTTL)
	if until <= 0 {
		c.linkRefused(g, errLinkExpired)
		return
	}
	scopes := portalScopes(link)
	tok, secret, err := c.links.tokens.CreateToken(ctx, auth.NewToken{Tenant: link.TenantID.String(),
		Name: "portal link " + link.ID.String(), Scopes: scopes, ExpiresIn: until})
	if err != nil {
		c.fail(g, http.StatusServiceUnavailable, "The portal cannot be opened right now. Try again in a moment.", err)
		return
	}
	if c.auth != nil {
		c.auth.TokenCreated(tok.ID)
	}
	_, value, err := c.sessions.createFor(ctx, secret, time.Now().Add(until), &link, tok.ID)
	if err != nil {
		c.fail(g, http.StatusServiceUnavailable, "The portal cannot be opened right now. Try again in a moment.", err)
		return
	}
	setCookieFor(g, portalOpenCookie, "", -1, c.framable())
	// A browser-session cookie: the row's expiry ends it, and the customer then reads why.
	setCookieFor(g, sessionCookie, value, 0, c.framable())
	g.Redirect(http.StatusSeeOther, Prefix+"/endpoints")
}

// linkRefused says why a link does not open, no more: an unknown and a tampered link read the same.
func (c *Console) linkRefused(g *gin.Context, err error) {
	status, text := http.StatusNotFound, "This link is not valid. Check that it was copied whole, or ask for a new one."
	switch {
	case errors.Is(err, errLinkExpired):
		status, text = http.StatusGone, "This link has expired. Ask for a new one."
	case errors.Is(err, errLinkRevoked):
		status, text = http.StatusGone, "This link was revoked. Ask for a new one."
	case errors.Is(err, errLinkUsed):
		status, text = http.StatusGone, "This link was already used: it opens once only. Ask for a new one."
	case !errors.Is(err, errLinkInvalid):
		c.fail(g, http.StatusServiceUnavailable, "The portal cannot be opened right now. Try again in a moment.", err)
		return
	}
	c.render(g, status, "error", page{Title: "Link refused", Portal: true, Error: text})
}

func (c *Console) portalEnded(g *gin.Context) {
	text := "You have left the portal. Open your link again to come back."
	if g.Query("why") == "revoked" {
		text = "This portal session has ended: its link expired or was revoked. Ask for a new link."
	}
	c.render(g, http.StatusOK, "error", page{Title: "Portal closed", Portal: true, Notice: text})
}
