package webhooks

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/tenancy"
)

// maxOverviewSubscriptions bounds one overview: a page of the subscriptions list at most.
const maxOverviewSubscriptions = 200

// HourStats is one hour of a subscription's attempts; Hour 0 is the hour just past, 23 the oldest.
type HourStats struct {
	Hour      int `json:"hour"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
}

// SubscriptionOverview is how one subscription did in the last 24 hours, as GET /webhooks/overview answers it.
type SubscriptionOverview struct {
	SubscriptionID uuid.UUID   `json:"subscription_id"`
	Succeeded      int         `json:"succeeded"` // attempts of the last 24 h that succeeded
	Failed         int         `json:"failed"`
	Hours          []HourStats `json:"hours" doc:"hours with finished attempts only"`
	Pending        int         `json:"pending"`
	DueBacklog     int         `json:"due_backlog"`
	LastError      *string     `json:"last_error" doc:"the newest failed attempt's error of the last 24 h"`
	LastErrorAt    *time.Time  `json:"last_error_at"`
}

// OverviewResponse answers GET /webhooks/overview.
type OverviewResponse struct {
	Items []SubscriptionOverview `json:"items"`
}

type overviewIn struct {
	IDs string `query:"subscription_ids" doc:"comma-separated subscription ids, at most 200"`
}

type overviewOut struct {
	Body OverviewResponse
}

func mountOverviewRoutes(g *httpapi.Group, h handlers) {
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/overview", ID: OpOverview,
		Summary: "How each named subscription did in the last 24 hours, hour by hour, with its backlog and newest error: one request for a page of endpoints."}, h.overview)
}

func (h handlers) overview(ctx context.Context, in *overviewIn) (*overviewOut, error) {
	var ids []uuid.UUID
	for raw := range strings.SplitSeq(in.IDs, ",") {
		if raw = strings.TrimSpace(raw); raw == "" {
			continue
		}
		id, err := uuid.Parse(raw)
		if err != nil {
			return nil, httpapi.InvalidQuery("subscription_ids", "comma-separated subscription ids; "+raw+" is not one")
		}
		ids = append(ids, id)
	}
	if len(ids) > maxOverviewSubscriptions {
		return nil, httpapi.InvalidQuery("subscription_ids", "at most 200 ids")
	}
	items, err := h.s.Overview(ctx, ids)
	if err != nil {
		return nil, err
	}
	return &overviewOut{Body: OverviewResponse{Items: items}}, nil
}

// Overview sums up the last 24 hours of each subscription in ids (of the caller's tenant; others are
// left out) in three statements, however many subscriptions there are.
func (s *Service) Overview(ctx context.Context, ids []uuid.UUID) ([]SubscriptionOverview, error) {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SubscriptionOverview, 0, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	now := s.now()
	keys := make([]string, len(ids))
	at := make(map[uuid.UUID]int, len(ids))
	for i, id := range ids {
		keys[i] = id.String()
		if _, seen := at[id]; !seen {
			at[id] = len(out)
			out = append(out, SubscriptionOverview{SubscriptionID: id, Hours: []HourStats{}})
		}
	}
	conn := s.store.conn(ctx)
	idList := "{" + strings.Join(keys, ",") + "}"
	since := now.Add(-24 * time.Hour)
	err = eachRow(conn.Raw(`SELECT subscription_id, least(floor(extract(epoch FROM (? - started_at)) / 3600), 23)::int AS hour,
			count(*) FILTER (WHERE result = 'succeeded'), count(*) FILTER (WHERE result = 'failed')
		FROM webhook_attempts
		WHERE tenant_id = ? AND subscription_id = ANY(CAST(? AS text[])::uuid[]) AND started_at >= ? AND result IN ('succeeded', 'failed')
		GROUP BY 1, 2`, now, tenant, idList, since), func(scan func(...any) error) error {
		var id uuid.UUID
		var h HourStats
		if err := scan(&id, &h.Hour, &h.Succeeded, &h.Failed); err != nil {
			return err
		}
		o := &out[at[id]]
		h.Hour = max(h.Hour, 0) // another replica's clock may put an attempt a moment after now
		o.Hours = append(o.Hours, h)
		o.Succeeded += h.Succeeded
		o.Failed += h.Failed
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(conn.Raw(`SELECT subscription_id, count(*) FILTER (WHERE next_attempt_at <= ?), count(*)
		FROM webhook_deliveries WHERE tenant_id = ? AND subscription_id = ANY(CAST(? AS text[])::uuid[]) AND status = ?
		GROUP BY 1`, now, tenant, idList, StatusPending), func(scan func(...any) error) error {
		var id uuid.UUID
		var due, pending int
		if err := scan(&id, &due, &pending); err != nil {
			return err
		}
		out[at[id]].DueBacklog, out[at[id]].Pending = due, pending
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(conn.Raw(`SELECT DISTINCT ON (subscription_id) subscription_id, error, started_at
		FROM webhook_attempts
		WHERE tenant_id = ? AND subscription_id = ANY(CAST(? AS text[])::uuid[]) AND started_at >= ? AND result = 'failed'
		ORDER BY subscription_id, started_at DESC`, tenant, idList, since), func(scan func(...any) error) error {
		var id uuid.UUID
		var msg string
		var when time.Time
		if err := scan(&id, &msg, &when); err != nil {
			return err
		}
		when = when.UTC()
		out[at[id]].LastError, out[at[id]].LastErrorAt = &msg, &when
		return nil
	})
	return out, err
}

// eachRow runs a query and hands each row's Scan to fn, closing the rows.
func eachRow(q *gorm.DB, fn func(scan func(...any) error) error) error {
	rows, err := q.Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
