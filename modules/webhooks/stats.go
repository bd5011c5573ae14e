package webhooks

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/tenancy"
)

// WindowStats sums up a subscription's attempts started within a window.
type WindowStats struct {
	Window      string   `json:"window"` // "1h" or "24h"
	Attempts    int      `json:"attempts"`
	Succeeded   int      `json:"succeeded"`
	Failed      int      `json:"failed"`
	SuccessRate *float64 `json:"success_rate"` // succeeded / (succeeded + failed); null without finished attempts
	P50MS       *float64 `json:"p50_duration_ms"`
	P95MS       *float64 `json:"p95_duration_ms"`
}

// SubscriptionStats is what GET /subscriptions/{id}/stats answers.
type SubscriptionStats struct {
	SubscriptionID uuid.UUID     `json:"subscription_id"`
	Status         string        `json:"status"`
	DueBacklog     int           `json:"due_backlog"` // pending deliveries due now (waiting, if not active)
	Pending        int           `json:"pending"`
	InFlight       int           `json:"in_flight"` // attempts taken and not yet finished
	Windows        []WindowStats `json:"windows"`
}

// statsWindows are the windows the stats cover, shortest first.
var statsWindows = []struct {
	name string
	span time.Duration
}{{"1h", time.Hour}, {"24h", 24 * time.Hour}}

// SubscriptionStats counts a live subscription's attempts and backlog.
func (s *Service) SubscriptionStats(ctx context.Context, id uuid.UUID) (SubscriptionStats, error) {
	sub, err := s.store.subscription(ctx, id)
	if err != nil {
		return SubscriptionStats{}, err
	}
	now := s.now()
	out := SubscriptionStats{SubscriptionID: id, Status: string(sub.Status)}
	if err := s.store.backlogOf(ctx, id, now, &out); err != nil {
		return SubscriptionStats{}, err
	}
	for _, w := range statsWindows {
		ws, err := s.store.attemptStats(ctx, id, now.Add(-w.span))
		if err != nil {
			return SubscriptionStats{}, err
		}
		ws.Window = w.name
		if finished := ws.Succeeded + ws.Failed; finished > 0 {
			rate := float64(ws.Succeeded) / float64(finished)
			ws.SuccessRate = &rate
		}
		out.Windows = append(out.Windows, ws)
	}
	return out, nil
}

// attemptStats counts the attempts started since from; durations are those of finished attempts.
func (s store) attemptStats(ctx context.Context, subID uuid.UUID, from time.Time) (WindowStats, error) {
	var ws WindowStats
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return ws, err
	}
	err = s.conn(ctx).Raw(`SELECT count(*),
			count(*) FILTER (WHERE result = 'succeeded'),
			count(*) FILTER (WHERE result = 'failed'),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE result IN ('succeeded', 'failed', 'superseded')),
			percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE result IN ('succeeded', 'failed', 'superseded'))
		FROM webhook_attempts WHERE tenant_id = ? AND subscription_id = ? AND started_at >= ?`, tenant, subID, from).Row().
		Scan(&ws.Attempts, &ws.Succeeded, &ws.Failed, &ws.P50MS, &ws.P95MS)
	return ws, err
}

func (s store) backlogOf(ctx context.Context, subID uuid.UUID, now time.Time, out *SubscriptionStats) error {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return err
	}
	return s.conn(ctx).Raw(`SELECT count(*) FILTER (WHERE next_attempt_at <= ?), count(*),
			(SELECT count(*) FROM webhook_attempts WHERE tenant_id = ? AND subscription_id = ? AND result = 'in_flight')
		FROM webhook_deliveries WHERE tenant_id = ? AND subscription_id = ? AND status = ?`,
		now, tenant, subID, tenant, subID, StatusPending).Row().
		Scan(&out.DueBacklog, &out.Pending, &out.InFlight)
}
