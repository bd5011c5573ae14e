package console

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/modules/webhooks"
)

// endpointForm is the create and edit form of an endpoint, as typed: shown again with the API's
// refusals beside each field, nothing lost.
type endpointForm struct {
	ID          string // "" when creating
	Version     string
	URL         string
	EventTypes  string // comma- or space-separated patterns
	Description string
	RateLimit   string // requests per second; "" = no limit
	Headers     string // "Name: value" lines; on edit "" keeps the current ones
	HeaderNames []string
	ClearHeader bool
	// Delivery control: a content filter and a transformation (CEL), the endpoint's own egress proxy,
	// and mTLS. The key is never shown, not even back after a refusal: on edit "" keeps the current one.
	Filter         string
	Transform      string
	ProxyURL       string
	ClientCert     string
	ClientKey      string
	CABundle       string
	HasClientCert  bool // on edit: the endpoint presents a client certificate now
	ClearClientKey bool
	Errors         map[string]string // by field: url, event_types, description, rate_limit, headers, and the API's names of the fields above
	Allowed        []string          // the portal's event type patterns; nil = any
}

// Err is the refusal of field, "" when none.
func (f endpointForm) Err(field string) string { return f.Errors[field] }

func readEndpointForm(g *gin.Context) endpointForm {
	return endpointForm{
		URL:            strings.TrimSpace(g.PostForm("url")),
		EventTypes:     strings.TrimSpace(g.PostForm("event_types")),
		Description:    strings.TrimSpace(g.PostForm("description")),
		RateLimit:      strings.TrimSpace(g.PostForm("rate_limit")),
		Headers:        g.PostForm("headers"),
		ClearHeader:    g.PostForm("clear_headers") == "on",
		Filter:         strings.TrimSpace(g.PostForm("filter")),
		Transform:      strings.TrimSpace(g.PostForm("transform")),
		ProxyURL:       strings.TrimSpace(g.PostForm("proxy_url")),
		ClientCert:     strings.TrimSpace(g.PostForm("tls_client_certificate")),
		ClientKey:      strings.TrimSpace(g.PostForm("tls_client_key")),
		CABundle:       strings.TrimSpace(g.PostForm("tls_ca_bundle")),
		ClearClientKey: g.PostForm("clear_client_certificate") == "on",
		Version:        g.PostForm("version"),
		Errors:         map[string]string{},
	}
}

func splitPatterns(raw string) []string {
	return strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

// parse checks what the API cannot know (the portal's event types, the form's own syntax) and builds
// the parts of the request the form filled in; the API checks everything else.
func (f *endpointForm) parse(grant *portalGrant) (types []string, rate *float64, headers map[string]string) {
	types = splitPatterns(f.EventTypes)
	for _, t := range types {
		if !grant.covers(t) {
			f.Errors["event_types"] = "This portal lets you subscribe only to " + strings.Join(grant.EventTypes, ", ") + "; " + t + " is outside them."
			break
		}
	}
	if f.RateLimit != "" {
		r, err := strconv.ParseFloat(f.RateLimit, 64)
		if err != nil {
			f.Errors["rate_limit"] = "Enter requests per second as a number, like 5 or 0.5, or leave it empty for no limit."
		} else {
			rate = &r
		}
	}
	if strings.TrimSpace(f.Headers) != "" {
		headers = map[string]string{}
		for line := range strings.SplitSeq(f.Headers, "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			name, value, ok := strings.Cut(line, ":")
			if !ok || strings.TrimSpace(name) == "" {
				f.Errors["headers"] = "Write one header per line as Name: value."
				break
			}
			headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	return types, rate, headers
}

// refused copies the API's field refusals into the form; it reports false when err is not one.
func (f *endpointForm) refused(err error) bool {
	var ae *apiError
	if !errors.As(err, &ae) || (ae.Status != http.StatusBadRequest && ae.Status != http.StatusUnprocessableEntity) {
		return false
	}
	for _, fe := range ae.Errors {
		field := strings.TrimPrefix(fe.Field, "body.")
		if i := strings.IndexAny(field, ".["); i > 0 {
			field = field[:i]
		}
		if _, known := map[string]bool{"url": true, "event_types": true, "description": true, "rate_limit": true, "headers": true,
			"filter": true, "transform": true, "proxy_url": true, "tls_client_certificate": true, "tls_client_key": true, "tls_ca_bundle": true}[field]; !known {
			field = "form"
		}
		if f.Errors[field] == "" {
			f.Errors[field] = capitalize(fe.Message)
		}
	}
	if len(f.Errors) == 0 {
		f.Errors["form"] = ae.Error()
	}
	return true
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (c *Console) showEndpointForm(g *gin.Context, s session, status int, f endpointForm) {
	if s.Portal != nil {
		f.Allowed = s.Portal.EventTypes
	}
	title := "New endpoint"
	if f.ID != "" {
		title = "Edit endpoint"
	}
	f.ClientKey = "" // a private key is not written back into a page
	errText := ""
	if len(f.Errors) > 0 {
		errText = "Not saved: check the fields marked below."
	}
	c.render(g, status, "endpoint_form", page{Title: title, Section: "endpoints", Session: &s, Error: errText, Data: f})
}

func (c *Console) newEndpoint(g *gin.Context, s session) error {
	if !c.api.may(&s, webhooks.OpCreateSubscription) {
		return &apiError{Status: http.StatusNotFound}
	}
	f := endpointForm{Errors: map[string]string{}}
	if s.Portal != nil && len(s.Portal.EventTypes) > 0 {
		f.EventTypes = strings.Join(s.Portal.EventTypes, ", ")
	}
	c.showEndpointForm(g, s, http.StatusOK, f)
	return nil
}

// createEndpoint creates the endpoint through the module's own route (so its validation and SSRF
// rules hold) and shows its signing secret, once.
func (c *Console) createEndpoint(g *gin.Context, s session) error {
	f := readEndpointForm(g)
	types, rate, headers := f.parse(s.Portal)
	if len(f.Errors) > 0 {
		c.showEndpointForm(g, s, http.StatusUnprocessableEntity, f)
		return nil
	}
	var sub subscription
	err := c.api.do(g.Request, s.Token, call{op: webhooks.OpCreateSubscription, idempotencyKey: formKey(g),
		body: webhooks.CreateSubscriptionRequest{URL: f.URL, EventTypes: types, Description: f.Description,
			Headers: headers, RateLimit: rate, Filter: f.Filter, Transform: f.Transform, ProxyURL: f.ProxyURL,
			TLSClientCertificate: f.ClientCert, TLSClientKey: f.ClientKey, TLSCABundle: f.CABundle}}, &sub)
	if f.refused(err) {
		c.showEndpointForm(g, s, http.StatusUnprocessableEntity, f)
		return nil
	}
	if err != nil {
		return err
	}
	g.Params = append(g.Params, gin.Param{Key: "id", Value: sub.ID.String()})
	return c.showEndpoint(g, s, http.StatusCreated, sub.Secret)
}

// visibleEndpoint reads the endpoint of the page's id, refusing one outside a portal's event types.
func (c *Console) visibleEndpoint(g *gin.Context, s session) (subscription, error) {
	var sub subscription
	if err := c.api.do(g.Request, s.Token, call{op: webhooks.OpGetSubscription, params: []string{g.Param("id")}}, &sub); err != nil {
		return sub, err
	}
	if s.Portal != nil && !s.Portal.seesEndpoint(sub.EventTypes) {
		return sub, &apiError{Status: http.StatusNotFound}
	}
	return sub, nil
}

func (c *Console) editEndpoint(g *gin.Context, s session) error {
	if !c.api.may(&s, webhooks.OpUpdateSubscription) {
		return &apiError{Status: http.StatusNotFound}
	}
	sub, err := c.visibleEndpoint(g, s)
	if err != nil {
		return err
	}
	f := endpointForm{ID: sub.ID.String(), Version: sub.Version, URL: sub.URL, EventTypes: strings.Join(sub.EventTypes, ", "),
		Description: sub.Description, Filter: sub.Filter, Transform: sub.Transform, ProxyURL: sub.ProxyURL,
		ClientCert: sub.TLSClientCertificate, CABundle: sub.TLSCABundle, HasClientCert: sub.TLSClientCertificate != "", Errors: map[string]string{}}
	if sub.RateLimit != nil {
		f.RateLimit = strconv.FormatFloat(*sub.RateLimit, 'f', -1, 64)
	}
	for name := range sub.Headers {
		f.HeaderNames = append(f.HeaderNames, name)
	}
	slices.Sort(f.HeaderNames)
	c.showEndpointForm(g, s, http.StatusOK, f)
	return nil
}

// updateEndpoint changes the version of the endpoint the form showed; if it changed since, the API
// says so and the form says "reload".
func (c *Console) updateEndpoint(g *gin.Context, s session) error {
	current, err := c.visibleEndpoint(g, s)
	if err != nil {
		return err
	}
	f := readEndpointForm(g)
	f.ID = current.ID.String()
	f.HasClientCert = current.TLSClientCertificate != ""
	for name := range current.Headers {
		f.HeaderNames = append(f.HeaderNames, name)
	}
	slices.Sort(f.HeaderNames)
	types, rate, headers := f.parse(s.Portal)
	if len(f.Errors) > 0 {
		c.showEndpointForm(g, s, http.StatusUnprocessableEntity, f)
		return nil
	}
	zero := 0.0
	if rate == nil {
		rate = &zero // an emptied field removes the limit
	}
	req := webhooks.UpdateSubscriptionRequest{URL: &f.URL, EventTypes: &types, Description: &f.Description, RateLimit: rate,
		Filter: &f.Filter, Transform: &f.Transform, ProxyURL: &f.ProxyURL, TLSCABundle: &f.CABundle}
	none := ""
	switch {
	case f.ClearClientKey:
		req.TLSClientCertificate, req.TLSClientKey = &none, &none
	case f.ClientKey != "":
		req.TLSClientCertificate, req.TLSClientKey = &f.ClientCert, &f.ClientKey
	case f.ClientCert != current.TLSClientCertificate:
		req.TLSClientCertificate = &f.ClientCert // without its key: the API says the key must come with it
	}
	switch {
	case headers != nil:
		req.Headers = &headers
	case f.ClearHeader:
		none := map[string]string{}
		req.Headers = &none
	}
	err = c.api.do(g.Request, s.Token, call{op: webhooks.OpUpdateSubscription, params: []string{f.ID}, body: req, ifMatch: f.Version}, nil)
	if conflicted(err) {
		f.Errors["form"] = "Not saved: this endpoint changed since you opened the form. Reload it and make your change again."
		c.showEndpointForm(g, s, http.StatusConflict, f)
		return nil
	}
	if f.refused(err) {
		c.showEndpointForm(g, s, http.StatusUnprocessableEntity, f)
		return nil
	}
	if err != nil {
		return err
	}
	return back(g, "/endpoints/"+f.ID, "notice", "saved")
}
