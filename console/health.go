package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/keelson/keelson/modules/webhooks"
)

// health is what the endpoints pages show of a subscription's last 24 hours: from the API's stats
// when it has them (counting attempts), else from its deliveries (counting finished deliveries).
type health struct {
	Succeeded, Failed int
	Unit              string // "attempts" or "deliveries": what Succeeded and Failed count
	Backlog           int
	Due               int  // of the backlog, due now; -1 when unknown
	BacklogMore       bool // more pending than the console counts
	Partial           bool // more deliveries in 24 h than the console reads; the figures cover the newest
	LastFailure       *delivery
	LastFailureAt     *time.Time
	Chart             template.HTML
}

type stats = webhooks.SubscriptionStats

// Finished is how many attempts or deliveries ended, either way.
func (h health) Finished() int { return h.Succeeded + h.Failed }

// Rate is the success rate of finished deliveries in percent, or -1 when none finished.
func (h health) Rate() int {
	if h.Succeeded+h.Failed == 0 {
		return -1
	}
	return h.Succeeded * 100 / (h.Succeeded + h.Failed)
}

// Bounds of what the console reads per subscription for its health: pages of the API's maximum size.
const (
	healthPageSize = 200
	healthMaxPages = 5
)

type hourBucket struct{ ok, failed int }

// health reads the subscription's deliveries of the last 24 h through the API (newest first, at most
// pages of them) for the hourly chart and the last failure, and its stats or pending deliveries for the figures.
func (c *Console) health(r *http.Request, s *session, sub subscription, now time.Time, pages int) (health, error) {
	token := s.Token
	h := health{Unit: "deliveries", Due: -1}
	var buckets [24]hourBucket
	since := now.Add(-24 * time.Hour)
	cursor := ""
	h.Partial = true
	for range pages {
		q := url.Values{"subscription_id": {sub.ID.String()}, "limit": {itoa(healthPageSize)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var l list[delivery]
		if err := c.api.do(r, token, call{op: webhooks.OpListDeliveries, query: q}, &l); err != nil {
			return h, err
		}
		done := l.NextCursor == nil
		for i := range l.Items {
			d := &l.Items[i]
			if d.CreatedAt.Before(since) {
				done = true
				break
			}
			if h.LastFailure == nil && d.LastError != nil && *d.LastError != "" {
				h.LastFailure = d
			}
			slot := hourSlot(now, d.UpdatedAt)
			switch d.Status {
			case "succeeded":
				h.Succeeded++
				buckets[slot].ok++
			case "failed":
				h.Failed++
				buckets[slot].failed++
			}
		}
		if done {
			h.Partial = false
			break
		}
		cursor = *l.NextCursor
	}
	if sub.LastFailureAt != nil {
		h.LastFailureAt = sub.LastFailureAt
	} else if h.LastFailure != nil {
		h.LastFailureAt = &h.LastFailure.UpdatedAt
	}

	if c.api.may(s, webhooks.OpSubscriptionStats) {
		var st stats
		if err := c.api.do(r, token, call{op: webhooks.OpSubscriptionStats, params: []string{sub.ID.String()}}, &st); err != nil {
			return h, err
		}
		for _, w := range st.Windows {
			if w.Window == "24h" {
				h.Succeeded, h.Failed, h.Unit, h.Partial = w.Succeeded, w.Failed, "attempts", false
			}
		}
		h.Backlog, h.Due = st.Pending, st.DueBacklog
		h.Chart = chart(buckets, h)
		return h, nil
	}

	cursor = ""
	for page := 0; ; page++ {
		if page == healthMaxPages {
			h.BacklogMore = true
			break
		}
		q := url.Values{"subscription_id": {sub.ID.String()}, "status": {"pending"}, "limit": {itoa(healthPageSize)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var l list[delivery]
		if err := c.api.do(r, token, call{op: webhooks.OpListDeliveries, query: q}, &l); err != nil {
			return h, err
		}
		h.Backlog += len(l.Items)
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	h.Chart = chart(buckets, h)
	return h, nil
}

// hourSlot is the bar of the chart (0 = 24 h ago, 23 = the last hour) a time falls in. Clamped both
// ways: another replica's clock may put an update a moment after now.
func hourSlot(now, t time.Time) int {
	return min(max(23-int(now.Sub(t)/time.Hour), 0), 23)
}

// chart draws 24 hourly bars: the height is the hour's finished deliveries against the busiest
// hour, green for succeeded on top of red for failed. Only numbers go into the markup.
func chart(buckets [24]hourBucket, h health) template.HTML {
	const barW, gap, height = 5, 1, 28
	peak := 0
	for _, b := range buckets {
		peak = max(peak, b.ok+b.failed)
	}
	label := "No finished deliveries in the last 24 hours"
	if rate := h.Rate(); rate >= 0 {
		label = fmt.Sprintf("%d%% of %d finished %s succeeded in the last 24 hours", rate, h.Succeeded+h.Failed, h.Unit)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg class="spark" role="img" aria-label="%s" width="%d" height="%d" viewBox="0 0 %d %d">`,
		label, 24*(barW+gap), height, 24*(barW+gap), height)
	fmt.Fprintf(&sb, `<title>%s</title>`, label)
	for i, b := range buckets {
		x := i * (barW + gap)
		total := b.ok + b.failed
		if total == 0 || peak == 0 {
			fmt.Fprintf(&sb, `<rect class="none" x="%d" y="%d" width="%d" height="1"/>`, x, height-1, barW)
			continue
		}
		full := max(2, total*height/peak)
		failH := b.failed * full / total
		if b.failed > 0 {
			failH = max(1, failH)
		}
		okH := full - failH
		if okH > 0 {
			fmt.Fprintf(&sb, `<rect class="ok" x="%d" y="%d" width="%d" height="%d"/>`, x, height-full, barW, okH)
		}
		if failH > 0 {
			fmt.Fprintf(&sb, `<rect class="bad" x="%d" y="%d" width="%d" height="%d"/>`, x, height-failH, barW, failH)
		}
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) //nolint:gosec // built from integers and fixed text only
}
