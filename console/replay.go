package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks"
)

const (
	// maxBulkReplay bounds one confirmed replay: each delivery is one redeliver call.
	maxBulkReplay = 200
	// maxRecoverScan bounds the failed deliveries counted before a recovery is confirmed.
	maxRecoverScan = 1000
)

// replayData is the confirmation page of a bulk replay or recovery.
type replayData struct {
	Kind      string // "replay" or "recover"
	Count     int
	More      bool // more matched than the bound: only the newest are replayed, or the count is a floor
	Endpoints int
	Filter    deliveryFilter
	Since     string
	Items     []delivery
	Back      string
}

// filterFromForm reads the deliveries filter a replay form carries, as the list page reads it.
func filterFromForm(g *gin.Context) (deliveryFilter, string) {
	q := url.Values{}
	for _, k := range []string{"status", "event_type", "subscription_id", "from", "until"} {
		if v := g.PostForm(k); v != "" {
			q.Set(k, v)
		}
	}
	g.Request.URL.RawQuery = q.Encode()
	return readDeliveryFilter(g)
}

// replay counts the deliveries the filter matches (at most maxBulkReplay, newest first) and asks for a
// confirmation; confirmed, it redelivers each at the version counted, leaving alone any that changed since.
func (c *Console) replay(g *gin.Context, s session) error {
	if !c.api.may(&s, webhooks.OpRedeliver) {
		return &apiError{Status: http.StatusNotFound}
	}
	f, bad := filterFromForm(g)
	backTo := "/deliveries?" + f.pageQuery("")
	if bad != "" {
		return &apiError{Status: http.StatusUnprocessableEntity, Detail: bad}
	}
	if g.PostForm("confirm") != "yes" {
		items, next, err := c.scanDeliveries(g.Request, &s, f, "", maxBulkReplay)
		if err != nil {
			return err
		}
		c.render(g, http.StatusOK, "replay", page{Title: "Replay deliveries", Section: "deliveries", Session: &s,
			Data: replayData{Kind: "replay", Count: len(items), More: next != "", Filter: f, Items: items, Back: Prefix + backTo}})
		return nil
	}
	ids, versions := g.PostFormArray("id"), g.PostFormArray("version")
	if len(ids) != len(versions) || len(ids) > maxBulkReplay {
		return &apiError{Status: http.StatusUnprocessableEntity, Detail: "The confirmation form was not the one this console made. Count again."}
	}
	done, skipped := 0, 0
	for i, id := range ids {
		if _, err := uuid.Parse(id); err != nil {
			skipped++
			continue
		}
		if s.Portal != nil {
			var d delivery
			if err := c.api.do(g.Request, s.Token, call{op: webhooks.OpGetDelivery, params: []string{id}}, &d); err != nil || !s.Portal.sees(d.EventType) {
				skipped++
				continue
			}
		}
		err := c.api.do(g.Request, s.Token, call{op: webhooks.OpRedeliver, params: []string{id}, body: struct{}{}, ifMatch: versions[i]}, nil)
		switch {
		case err == nil:
			done++
		case conflicted(err) || statusOf(err) == http.StatusNotFound:
			skipped++
		default:
			return err
		}
	}
	g.Redirect(http.StatusSeeOther, Prefix+backTo+"&"+url.Values{"notice": {"replayed"},
		"n": {strconv.Itoa(done)}, "skipped": {strconv.Itoa(skipped)}}.Encode())
	return nil
}

// recoverFailed counts the failed deliveries since a time and, confirmed, starts the module's recovery
// (a background operation per endpoint) on every endpoint that has one.
func (c *Console) recoverFailed(g *gin.Context, s session) error {
	if !c.api.may(&s, webhooks.OpRecoverSubscription) {
		return &apiError{Status: http.StatusNotFound}
	}
	sinceRaw := g.PostForm("since")
	since, err := time.Parse(timeInput, sinceRaw)
	if err != nil {
		return &apiError{Status: http.StatusUnprocessableEntity, Detail: "Since must be a date and time like 2026-12-01T14:30."}
	}
	f := deliveryFilter{Status: "failed", From: sinceRaw, from: since}
	items, next, err := c.scanDeliveries(g.Request, &s, f, "", maxRecoverScan)
	if err != nil {
		return err
	}
	endpoints := map[uuid.UUID]bool{}
	for _, d := range items {
		endpoints[d.SubscriptionID] = true
	}
	if g.PostForm("confirm") != "yes" {
		c.render(g, http.StatusOK, "replay", page{Title: "Replay failed deliveries", Section: "deliveries", Session: &s,
			Data: replayData{Kind: "recover", Count: len(items), More: next != "", Endpoints: len(endpoints), Since: sinceRaw,
				Back: Prefix + "/deliveries?status=failed&from=" + url.QueryEscape(sinceRaw)}})
		return nil
	}
	started := 0
	for id := range endpoints {
		err := c.api.do(g.Request, s.Token, call{op: webhooks.OpRecoverSubscription, params: []string{id.String()},
			body: map[string]string{"since": since.UTC().Format(time.RFC3339)}}, nil)
		if err != nil && statusOf(err) != http.StatusNotFound {
			return err
		}
		if err == nil {
			started++
		}
	}
	return back(g, "/deliveries?status=failed&from="+url.QueryEscape(sinceRaw)+"&"+url.Values{"n": {strconv.Itoa(started)}}.Encode(), "notice", "recovering-all")
}

// countNotice is the text of a notice that carries counts in the address (numbers only).
func countNotice(g *gin.Context) string {
	n, _ := strconv.Atoi(g.Query("n"))
	switch g.Query("notice") {
	case "replayed":
		text := fmt.Sprintf("Replay requested for %d deliveries: their new attempts appear here by themselves.", n)
		if skipped, _ := strconv.Atoi(g.Query("skipped")); skipped > 0 {
			text += fmt.Sprintf(" %d changed since you counted them and were left alone.", skipped)
		}
		return text
	case "recovering-all":
		return fmt.Sprintf("Recovery started on %d %s: their failed deliveries are queued again in the background.",
			n, plural(n, "endpoint", "endpoints"))
	}
	return ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// hiddenFilter is the filter as hidden fields of a form.
func (f deliveryFilter) Hidden() [][2]string {
	var out [][2]string
	for _, kv := range [][2]string{{"status", f.Status}, {"event_type", f.EventType}, {"subscription_id", f.Subscription},
		{"from", f.From}, {"until", f.Until}} {
		if strings.TrimSpace(kv[1]) != "" {
			out = append(out, kv)
		}
	}
	return out
}
