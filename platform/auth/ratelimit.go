package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keelson/keelson/platform/database"
)

// Limiter is a fixed-window request counter per token, kept in PostgreSQL so every replica counts
// into the same window: one upsert per request, on the database's clock. A replica that has seen a
// token refused answers 429 from memory until that window ends, so a flood costs no queries.
type Limiter struct {
	db     *sql.DB
	limit  int
	window time.Duration

	mu      sync.Mutex
	blocked map[string]time.Time // token → end of the window it is refused in
}

// NewLimiter allows limit requests per token in each window.
func NewLimiter(db *database.DB, limit int, window time.Duration) (*Limiter, error) {
	if db == nil || limit < 1 || window < time.Second {
		return nil, errors.New("auth: a rate limit needs a DB, a limit of at least 1 and a window of at least 1s")
	}
	return &Limiter{db: db.SQL(), limit: limit, window: window, blocked: map[string]time.Time{}}, nil
}

// ParseRate reads "N/window" ("6000/1m"); "0" or "" is no limit (0, 0).
func ParseRate(raw string) (int, time.Duration, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || raw == "0" {
		return 0, 0, nil
	}
	n, w, ok := strings.Cut(raw, "/")
	limit, err := strconv.Atoi(n)
	window, werr := time.ParseDuration(w)
	if !ok || err != nil || werr != nil || limit < 1 || window < time.Second || window > 24*time.Hour || window%time.Second != 0 {
		return 0, 0, fmt.Errorf("%q is not N/window (6000/1m: N ≥ 1, a window of whole seconds from 1s to 24h), or 0", raw)
	}
	return limit, window, nil
}

// Allow counts one request of key; when the window's limit is spent it reports how long until the next window.
func (l *Limiter) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	now := time.Now()
	l.mu.Lock()
	until, blocked := l.blocked[key]
	if blocked && !now.Before(until) {
		delete(l.blocked, key)
		blocked = false
	}
	l.mu.Unlock()
	if blocked {
		return false, until.Sub(now), nil
	}
	var count int
	var remaining float64
	err := l.db.QueryRowContext(ctx, `
		INSERT INTO api_rate_windows AS w (key, window_start, count)
		VALUES ($1, to_timestamp(floor(extract(epoch FROM clock_timestamp())::float8 / $2::float8) * $2::float8), 1)
		ON CONFLICT (key) DO UPDATE SET
			count = CASE WHEN w.window_start = EXCLUDED.window_start THEN w.count + 1 ELSE 1 END,
			window_start = EXCLUDED.window_start
		RETURNING count, extract(epoch FROM w.window_start + make_interval(secs => $2::float8) - clock_timestamp())::float8`,
		key, l.window.Seconds()).Scan(&count, &remaining)
	if err != nil {
		return false, 0, err
	}
	if count <= l.limit {
		return true, 0, nil
	}
	wait := time.Duration(remaining * float64(time.Second))
	l.mu.Lock()
	if len(l.blocked) > 100000 {
		clear(l.blocked)
	}
	l.blocked[key] = now.Add(wait)
	l.mu.Unlock()
	return false, wait, nil
}
