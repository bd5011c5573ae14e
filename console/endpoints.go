package console

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks"
)

type subscription = webhooks.SubscriptionResponse

func itoa(n int) string { return strconv.Itoa(n) }

type endpointRow struct {
	S      subscription
	Health health
}

type endpointsData struct {
	Items  []endpointRow
	Next   string
	Create bool // the token may create endpoints
}

// endpointsPerPage bounds one page; its API calls are two (the list and one overview) however many it shows.
const endpointsPerPage = 20

func (c *Console) endpoints(g *gin.Context, s session) error {
	subs, next, err := listPage[subscription](c.api, g, s.Token, call{op: webhooks.OpListSubscriptions}, endpointsPerPage, "/endpoints")
	if err != nil {
		return err
	}
	hs, err := c.healthOf(g.Request, &s, subs)
	if err != nil {
		return err
	}
	data := endpointsData{Next: next, Create: c.api.may(&s, webhooks.OpCreateSubscription)}
	for _, sub := range subs {
		if s.Portal != nil && !s.Portal.seesEndpoint(sub.EventTypes) {
			continue
		}
		data.Items = append(data.Items, endpointRow{S: sub, Health: hs[sub.ID]})
	}
	c.render(g, http.StatusOK, "endpoints", page{Title: "Endpoints", Section: "endpoints", Session: &s, Data: data})
	return nil
}

// actions are the endpoint actions the API has routes for.
type actions struct {
	Pause, Resume, Test, Rotate, Recover, Edit, Delete bool
}

type endpointData struct {
	S          subscription
	Health     health
	Recent     []delivery
	Can        actions
	NewSecret  string
	RecoverMin string
	Operation  string
}

func (c *Console) endpoint(g *gin.Context, s session) error {
	return c.showEndpoint(g, s, http.StatusOK, "")
}

func (c *Console) showEndpoint(g *gin.Context, s session, status int, newSecret string) error {
	sub, err := c.visibleEndpoint(g, s)
	if err != nil {
		return err
	}
	now := time.Now()
	hs, err := c.healthOf(g.Request, &s, []subscription{sub})
	if err != nil {
		return err
	}
	h := hs[sub.ID]
	var recent list[delivery]
	if err := c.api.do(g.Request, s.Token, call{op: webhooks.OpListDeliveries,
		query: url.Values{"subscription_id": {sub.ID.String()}, "limit": {"10"}}}, &recent); err != nil {
		return err
	}
	state := sub.Status
	data := endpointData{S: sub, Health: h, Recent: recent.Items, NewSecret: newSecret,
		RecoverMin: now.Add(-24 * time.Hour).UTC().Format(timeInput),
		Can: actions{
			Pause:   state == webhooks.StatusActive && c.api.may(&s, webhooks.OpPauseSubscription),
			Resume:  state != webhooks.StatusActive && c.api.may(&s, webhooks.OpResumeSubscription),
			Test:    c.api.may(&s, webhooks.OpSendTest),
			Rotate:  c.api.may(&s, webhooks.OpRotateSecret),
			Recover: c.api.may(&s, webhooks.OpRecoverSubscription),
			Edit:    c.api.may(&s, webhooks.OpUpdateSubscription),
			Delete:  c.api.may(&s, webhooks.OpDeleteSubscription),
		}}
	c.render(g, status, "endpoint", page{Title: "Endpoint " + sub.URL, Section: "endpoints", Session: &s, Data: data})
	return nil
}

// endpointAction runs one of the endpoint's API actions with the version the page showed.
func (c *Console) endpointAction(g *gin.Context, s session) error {
	if _, err := c.visibleEndpoint(g, s); err != nil {
		return err
	}
	id := escapePath(g.Param("id"))
	params := []string{g.Param("id")}
	action := g.Param("action")
	version := g.PostForm("version")
	switch action {
	case "edit":
		return c.updateEndpoint(g, s)
	case "delete":
		err := c.api.do(g.Request, s.Token, call{op: webhooks.OpDeleteSubscription, params: params, ifMatch: version}, nil)
		if conflicted(err) {
			return back(g, "/endpoints/"+id, "error", "conflict")
		}
		if err != nil {
			return err
		}
		return back(g, "/endpoints", "notice", "deleted")
	case "pause", "resume":
		op := webhooks.OpPauseSubscription
		if action == "resume" {
			op = webhooks.OpResumeSubscription
		}
		err := c.api.do(g.Request, s.Token, call{op: op, params: params, body: struct{}{}, ifMatch: version}, nil)
		if conflicted(err) {
			return back(g, "/endpoints/"+id, "error", "conflict")
		}
		if err != nil {
			return err
		}
		return back(g, "/endpoints/"+id, "notice", action+"d")
	case "test":
		var d delivery
		if err := c.api.do(g.Request, s.Token, call{op: webhooks.OpSendTest, params: params, body: struct{}{}, idempotencyKey: formKey(g)}, &d); err != nil {
			return err
		}
		if d.ID != uuid.Nil {
			return back(g, "/deliveries/"+d.ID.String(), "notice", "tested")
		}
		return back(g, "/endpoints/"+id, "notice", "tested")
	case "rotate-secret":
		var sub subscription
		err := c.api.do(g.Request, s.Token, call{op: webhooks.OpRotateSecret, params: params, body: struct{}{}, ifMatch: version}, &sub)
		if conflicted(err) {
			return back(g, "/endpoints/"+id, "error", "conflict")
		}
		if err != nil {
			return err
		}
		// Shown in this answer only, never in an address or a later page.
		return c.showEndpoint(g, s, http.StatusOK, sub.Secret)
	case "recover":
		since, err := time.Parse(timeInput, g.PostForm("since"))
		if err != nil {
			return &apiError{Status: http.StatusUnprocessableEntity, Detail: "Since must be a date and time like 2026-12-01T14:30."}
		}
		err = c.api.do(g.Request, s.Token, call{op: webhooks.OpRecoverSubscription, params: params,
			body: map[string]string{"since": since.UTC().Format(time.RFC3339)}, idempotencyKey: formKey(g)}, nil)
		if err != nil {
			return err
		}
		return back(g, "/endpoints/"+id, "notice", "recovering")
	}
	return &apiError{Status: http.StatusNotFound}
}
