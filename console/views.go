package console

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/modules/conversations"
	"github.com/keelson/keelson/modules/webhooks"
)

//go:embed templates
var templateFiles embed.FS

// page is what every template gets; Data is the page's own.
type page struct {
	Title   string
	Section string // the navigation entry to mark current
	Session *session
	Notice  string
	Error   string
	Catalog bool // the API lists event types
	// Conversations says whether the session's token may read conversations (the navigation offers them).
	Conversations bool
	// Portal marks the portal's own pages (opening a link, refused, ended), before any portal session.
	Portal bool
	Data   any
}

// InPortal says whether the page is a customer's: a portal session's or the portal's own.
func (p page) InPortal() bool { return p.Portal || (p.Session != nil && p.Session.Portal != nil) }

// PortalName is who the portal session's link is for.
func (p page) PortalName() string {
	if p.Session == nil || p.Session.Portal == nil {
		return ""
	}
	return p.Session.Portal.Name
}

// SignedIn says whether the page belongs to a session (the sign-in form has only its CSRF token).
func (p page) SignedIn() bool { return p.Session != nil && p.Session.Token != "" }

// CSRF is the token every form of the page carries.
func (p page) CSRF() string {
	if p.Session == nil {
		return ""
	}
	return p.Session.CSRF
}

type views struct {
	pages map[string]*template.Template
}

var funcs = template.FuncMap{
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		case *time.Time:
			if v == nil || v.IsZero() {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		return "—"
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"short": func(v any) string {
		id := fmt.Sprint(v)
		if len(id) > 8 {
			return id[:8]
		}
		return id
	},
	"str": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
	"code": func(p *int) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprint(*p)
	},
	"deref": func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	},
	"pretty": pretty,
	"rate": func(r *float64) string {
		if r == nil {
			return ""
		}
		return strconv.FormatFloat(*r, 'f', -1, 64)
	},
	"headerNames": func(h map[string]string) string {
		names := make([]string, 0, len(h))
		for n := range h {
			names = append(names, n)
		}
		slices.Sort(names)
		return strings.Join(names, ", ")
	},
	"join": strings.Join,
	// formKey makes each rendered form's idempotency key.
	"formKey": func() string {
		b := make([]byte, 18)
		_, _ = rand.Read(b)
		return base64.RawURLEncoding.EncodeToString(b)
	},
}

// pretty indents JSON for reading and undoes the \u003c, \u003e and \u0026 escapes Go's encoder adds:
// the template escapes the text for HTML, and the reader sees the characters the JSON means.
func pretty(v any) string {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	case string:
		raw = []byte(x)
	default:
		raw, _ = json.Marshal(x)
	}
	var buf bytes.Buffer
	if len(raw) == 0 || json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	in := buf.Bytes()
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		if in[i] != '\\' || i+1 >= len(in) {
			out = append(out, in[i])
			continue
		}
		if i+5 < len(in) && in[i+1] == 'u' {
			switch string(in[i+2 : i+6]) {
			case "003c", "003C":
				out, i = append(out, '<'), i+5
				continue
			case "003e", "003E":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out, i = append(out, in[i], in[i+1]), i+1 // any other escape, \\ included, stays as it is
	}
	return string(out)
}

func loadViews() (*views, error) {
	layout, err := fs.ReadFile(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	partials, err := fs.ReadFile(templateFiles, "templates/partials.html")
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(templateFiles, "templates")
	if err != nil {
		return nil, err
	}
	v := &views{pages: map[string]*template.Template{}}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".html")
		if name == "layout" || name == "partials" || e.IsDir() {
			continue
		}
		body, err := fs.ReadFile(templateFiles, "templates/"+e.Name())
		if err != nil {
			return nil, err
		}
		t, err := template.New("layout").Funcs(funcs).Parse(string(layout))
		if err != nil {
			return nil, fmt.Errorf("console: layout: %w", err)
		}
		if _, err := t.Parse(string(partials)); err != nil {
			return nil, fmt.Errorf("console: partials: %w", err)
		}
		if _, err := t.Parse(string(body)); err != nil {
			return nil, fmt.Errorf("console: %s: %w", e.Name(), err)
		}
		v.pages[name] = t
	}
	return v, nil
}

// render writes a page; a template failure is a programming error and answers a plain 500.
func (c *Console) render(g *gin.Context, status int, name string, p page) {
	signedIn := p.Session
	if signedIn == nil {
		signedIn = &session{}
	}
	p.Catalog = c.api.may(signedIn, webhooks.OpListEventTypes)
	p.Conversations = signedIn.Token != "" && signedIn.Portal == nil && c.api.may(signedIn, conversations.OpListConversations)
	if p.Notice == "" {
		p.Notice = notices[g.Query("notice")]
	}
	if p.Error == "" {
		p.Error = errorTexts[g.Query("error")]
	}
	var buf bytes.Buffer
	t := c.views.pages[name]
	if t == nil {
		c.logger.Error("console: no template", "name", name)
		g.String(http.StatusInternalServerError, "internal error")
		return
	}
	if status == http.StatusOK && g.GetHeader(liveHeader) == "1" && t.Lookup("live") != nil {
		c.renderLive(g, t, p)
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		c.logger.Error("console: render", "template", name, "error", err)
		g.String(http.StatusInternalServerError, "internal error")
		return
	}
	g.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

// liveHeader marks the console's own polling requests: they get the page's live regions only.
const liveHeader = "X-Console-Live"

// renderLive answers a poll with the page's live regions, or 304 when they are what the browser has:
// the ETag is a hash of the regions, so a poll that finds nothing new costs the browser no work.
func (c *Console) renderLive(g *gin.Context, t *template.Template, p page) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "live", p); err != nil {
		c.logger.Error("console: render live regions", "error", err)
		g.String(http.StatusInternalServerError, "internal error")
		return
	}
	sum := sha256.Sum256(buf.Bytes())
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
	g.Header(liveHeader, "1")
	g.Header("ETag", etag)
	g.Header("Vary", liveHeader)
	if g.GetHeader("If-None-Match") == etag {
		g.Status(http.StatusNotModified)
		return
	}
	g.Data(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}

// notices and errorTexts are the messages a redirect after a form may ask for by code; a code keeps
// the text out of the address bar and out of anyone's control.
var notices = map[string]string{
	"signed-out":  "You are signed out.",
	"expired":     "Your session has ended. Sign in again.",
	"token":       "Your API token is no longer accepted. Sign in with a valid one.",
	"redelivered": "Redelivery requested: a new attempt will appear here in a moment — reload to see it.",
	"posted":      "Message posted. The assistant's reply and any proposal appear in a moment — reload to see them.",
	"created":     "Conversation created.",
	"accepted":    "Proposal accepted. Its action is applied in a moment — reload to see it.",
	"rejected":    "Proposal rejected.",
	"tested":      "Test event sent: this is its delivery — reload to see the attempt.",
	"paused":      "Endpoint paused: its deliveries wait until it is resumed.",
	"resumed":     "Endpoint resumed.",
	"recovering":  "Recovery started: the failed deliveries are queued again in the background.",
	"saved":       "Endpoint saved.",
	"deleted":     "Endpoint deleted: its pending deliveries are given up.",
}

var errorTexts = map[string]string{
	"conflict": "Not done: this changed since you loaded it — reload and try again.",
	"decided":  "Not done: this proposal was already decided — reload to see the decision.",
	"empty":    "Write something first.",
}
