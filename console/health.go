package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks"
)

// health is what the endpoints pages show of a subscription's last 24 hours, from the API's overview.
type health struct {
	Succeeded, Failed int
	Unit              string // what Succeeded and Failed count
	Backlog           int
	Due               int // of the backlog, due now
	LastError         string
	LastFailureAt     *time.Time
	Chart             template.HTML
}

// Finished is how many attempts ended, either way.
func (h health) Finished() int { return h.Succeeded + h.Failed }

// Rate is the success rate of finished attempts in percent, or -1 when none finished.
func (h health) Rate() int {
	if h.Succeeded+h.Failed == 0 {
		return -1
	}
	return h.Succeeded * 100 / (h.Succeeded + h.Failed)
}

type hourBucket struct{ ok, failed int }

// healthOf asks the API once for the last 24 h of every subscription in subs: a page of endpoints costs
// one call for their health, however many endpoints it shows.
func (c *Console) healthOf(r *http.Request, s *session, subs []subscription) (map[uuid.UUID]health, error) {
	out := make(map[uuid.UUID]health, len(subs))
	if len(subs) == 0 {
		return out, nil
	}
	ids := make([]string, len(subs))
	for i, sub := range subs {
		ids[i] = sub.ID.String()
	}
	var ov webhooks.OverviewResponse
	if err := c.api.do(r, s.Token, call{op: webhooks.OpOverview,
		query: url.Values{"subscription_ids": {strings.Join(ids, ",")}}}, &ov); err != nil {
		return nil, err
	}
	last := make(map[uuid.UUID]*time.Time, len(subs))
	for _, sub := range subs {
		last[sub.ID] = sub.LastFailureAt
	}
	for _, o := range ov.Items {
		h := health{Succeeded: o.Succeeded, Failed: o.Failed, Unit: "attempts", Backlog: o.Pending, Due: o.DueBacklog,
			LastFailureAt: last[o.SubscriptionID]}
		if o.LastError != nil {
			h.LastError = *o.LastError
		}
		if h.LastFailureAt == nil {
			h.LastFailureAt = o.LastErrorAt
		}
		var buckets [24]hourBucket
		for _, hs := range o.Hours {
			slot := 23 - min(max(hs.Hour, 0), 23)
			buckets[slot].ok += hs.Succeeded
			buckets[slot].failed += hs.Failed
		}
		h.Chart = chart(buckets, h)
		out[o.SubscriptionID] = h
	}
	return out, nil
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
