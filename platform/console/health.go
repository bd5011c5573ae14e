package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// health is what the endpoints pages show of a subscription's last 24 hours, read from its deliveries.
type health struct {
	Succeeded, Failed int
	Backlog           int
	BacklogMore       bool // more pending than the console counts
	Partial           bool // more deliveries in 24 h than the console reads; the figures cover the newest
	LastFailure       *delivery
	LastFailureAt     *time.Time
	Chart             template.HTML
}

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

// health reads the subscription's deliveries of the last 24 h through the API (newest first) and its
// pending ones, and draws the hourly outcomes.
func (c *Console) health(r *http.Request, token string, sub subscription, now time.Time) (health, error) {
	var h health
	var buckets [24]hourBucket
	since := now.Add(-24 * time.Hour)
	cursor := ""
	h.Partial = true
	for range healthMaxPages {
		q := url.Values{"subscription_id": {sub.ID}, "limit": {itoa(healthPageSize)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var l list[delivery]
		if err := c.api.do(r, token, call{method: http.MethodGet, path: "/webhooks/deliveries", query: q}, &l); err != nil {
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
			slot := 23 - int(now.Sub(d.UpdatedAt)/time.Hour)
			if slot < 0 {
				slot = 0
			}
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

	cursor = ""
	for page := 0; ; page++ {
		if page == healthMaxPages {
			h.BacklogMore = true
			break
		}
		q := url.Values{"subscription_id": {sub.ID}, "status": {"pending"}, "limit": {itoa(healthPageSize)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var l list[delivery]
		if err := c.api.do(r, token, call{method: http.MethodGet, path: "/webhooks/deliveries", query: q}, &l); err != nil {
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
		label = fmt.Sprintf("%d%% of %d finished deliveries succeeded in the last 24 hours", rate, h.Succeeded+h.Failed)
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
