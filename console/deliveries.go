package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/modules/webhooks"
)

// The module's own shapes: a field renamed there fails this build, not a page.
type delivery = webhooks.DeliveryResponse

// deliveryFilter is the deliveries page's form.
type deliveryFilter struct {
	Status, EventType, Subscription, From, Until string
	from, until                                  time.Time
}

// timeInput is the layout of <input type="datetime-local">, read as UTC.
const timeInput = "2006-01-02T15:04"

func readDeliveryFilter(g *gin.Context) (deliveryFilter, string) {
	f := deliveryFilter{
		Status: g.Query("status"), EventType: strings.TrimSpace(g.Query("event_type")),
		Subscription: strings.TrimSpace(g.Query("subscription_id")),
		From:         g.Query("from"), Until: g.Query("until"),
	}
	var bad []string
	for _, p := range []struct {
		raw  string
		dst  *time.Time
		name string
	}{{f.From, &f.from, "From"}, {f.Until, &f.until, "Until"}} {
		if p.raw == "" {
			continue
		}
		t, err := time.Parse(timeInput, p.raw)
		if err != nil {
			bad = append(bad, p.name+" must be a date and time like 2026-12-01T14:30.")
			continue
		}
		*p.dst = t
	}
	return f, strings.Join(bad, " ")
}

func (f deliveryFilter) apiQuery() url.Values {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.EventType != "" {
		q.Set("event_type", f.EventType)
	}
	if f.Subscription != "" {
		q.Set("subscription_id", f.Subscription)
	}
	return q
}

// pageQuery is the filter as the address of the next page.
func (f deliveryFilter) pageQuery(cursor string) string {
	q := f.apiQuery()
	if f.From != "" {
		q.Set("from", f.From)
	}
	if f.Until != "" {
		q.Set("until", f.Until)
	}
	q.Set("cursor", cursor)
	return q.Encode()
}

const (
	// maxAPIPage is the largest page the API's lists give.
	maxAPIPage        = 200
	deliveriesPerPage = 50
	// maxScanCalls bounds the API pages one console page reads when a time range skips rows.
	maxScanCalls = 20
)

type deliveriesData struct {
	Filter     deliveryFilter
	Items      []delivery
	Next       string
	Statuses   []string
	CanReplay  bool
	CanRecover bool
	RecoverMin string
}

// deliveries lists through the API's own filters and cursor; the time range is applied here, walking
// the API's newest-first pages and stopping at the first delivery older than From.
func (c *Console) deliveries(g *gin.Context, s session) error {
	f, bad := readDeliveryFilter(g)
	data := deliveriesData{Filter: f, Statuses: []string{"pending", "succeeded", "failed"},
		CanReplay: c.api.may(&s, webhooks.OpRedeliver), CanRecover: c.api.may(&s, webhooks.OpRecoverSubscription),
		RecoverMin: time.Now().Add(-24 * time.Hour).UTC().Format(timeInput)}
	if bad != "" {
		c.render(g, http.StatusUnprocessableEntity, "deliveries", page{Title: "Deliveries", Section: "deliveries",
			Session: &s, Error: bad, Data: data})
		return nil
	}
	items, next, err := c.scanDeliveries(g.Request, &s, f, g.Query("cursor"), deliveriesPerPage)
	if ae := (*apiError)(nil); errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusUnprocessableEntity) {
		c.render(g, ae.Status, "deliveries", page{Title: "Deliveries", Section: "deliveries", Session: &s,
			Error: "The filter was refused: " + ae.Error(), Data: data})
		return nil
	}
	if err != nil {
		return err
	}
	data.Items = items
	if next != "" {
		data.Next = Prefix + "/deliveries?" + f.pageQuery(next)
	}
	c.render(g, http.StatusOK, "deliveries", page{Title: "Deliveries", Section: "deliveries", Session: &s, Data: data,
		Notice: countNotice(g)})
	return nil
}

// scanDeliveries reads deliveries through the API's filters, keeping those in the time range and, in a
// portal, of the link's event types.
func (c *Console) scanDeliveries(r *http.Request, s *session, f deliveryFilter, cursor string, want int) ([]delivery, string, error) {
	token := s.Token
	var out []delivery
	for range maxScanCalls {
		q := f.apiQuery()
		q.Set("limit", itoa(min(want-len(out), maxAPIPage)))
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var l list[delivery]
		if err := c.api.do(r, token, call{op: webhooks.OpListDeliveries, query: q}, &l); err != nil {
			return nil, "", err
		}
		for _, d := range l.Items {
			if !f.until.IsZero() && d.CreatedAt.After(f.until) {
				continue
			}
			if !s.Portal.sees(d.EventType) {
				continue
			}
			if !f.from.IsZero() && d.CreatedAt.Before(f.from) {
				return out, "", nil
			}
			out = append(out, d)
		}
		if l.NextCursor == nil {
			return out, "", nil
		}
		cursor = *l.NextCursor
		if len(out) >= want {
			return out, cursor, nil
		}
	}
	return out, cursor, nil
}

type deliveryData struct {
	D          delivery
	CanReplay  bool
	Subscriber string
}

func (c *Console) delivery(g *gin.Context, s session) error {
	var d delivery
	if err := c.api.do(g.Request, s.Token, call{op: webhooks.OpGetDelivery,
		params: []string{g.Param("id")}}, &d); err != nil {
		return err
	}
	if !s.Portal.sees(d.EventType) {
		return &apiError{Status: http.StatusNotFound}
	}
	c.render(g, http.StatusOK, "delivery", page{Title: "Delivery " + d.ID.String(), Section: "deliveries", Session: &s,
		Data: deliveryData{D: d, CanReplay: c.api.may(&s, webhooks.OpRedeliver)}})
	return nil
}

// redeliver asks for a new attempt of the version the page showed; if the delivery moved on since,
// the API says so and the page says "reload".
func (c *Console) redeliver(g *gin.Context, s session) error {
	id := escapePath(g.Param("id"))
	if s.Portal != nil {
		var d delivery
		if err := c.api.do(g.Request, s.Token, call{op: webhooks.OpGetDelivery, params: []string{g.Param("id")}}, &d); err != nil {
			return err
		}
		if !s.Portal.sees(d.EventType) {
			return &apiError{Status: http.StatusNotFound}
		}
	}
	err := c.api.do(g.Request, s.Token, call{op: webhooks.OpRedeliver, params: []string{g.Param("id")},
		body: struct{}{}, ifMatch: g.PostForm("version")}, nil)
	switch {
	case conflicted(err):
		return back(g, "/deliveries/"+id, "error", "conflict")
	case err != nil:
		return err
	}
	return back(g, "/deliveries/"+id, "notice", "redelivered")
}
