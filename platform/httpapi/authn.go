package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/correlation"
	"github.com/keelson/keelson/platform/tenancy"
)

// Problem codes of authentication and authorization.
const (
	CodeInsufficientScope = "insufficient_scope"
	CodeTenantDisabled    = "tenant_disabled"
	CodeRateLimited       = "rate_limited"
)

// failureSummaryEvery bounds the WARN lines about failed authentications; each failure itself is DEBUG.
const failureSummaryEvery = time.Minute

// Default bound of failed authentications per source address and replica (Options.AuthFailureLimit).
const (
	DefaultAuthFailureLimit  = 30
	DefaultAuthFailureWindow = time.Minute
)

// maxFailureAddresses bounds the addresses remembered; past it the expired windows go, then all.
const maxFailureAddresses = 100_000

// authenticator puts the principal of the bearer token, and its tenant, into the request context.
type authenticator struct {
	auth     *auth.Authenticator
	limit    RateLimiter
	failures *failureLog
	guard    *failureLimiter // nil = no bound on failed authentications
}

// RateLimiter counts a request of a token; a refused one waits retryAfter. Shared by every replica
// when backed by the database (auth.Limiter).
type RateLimiter interface {
	Allow(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error)
}

func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// principal authenticates c's request, answering the refusal itself; ok is false when it did. An
// address past its failed authentications is answered 429 from memory, before any token lookup,
// unless its token is one this replica already knows valid.
func (a *authenticator) principal(c *gin.Context) (auth.Principal, bool) {
	token := bearerToken(c.Request)
	if a.guard != nil {
		if wait, blocked := a.guard.blocked(c.ClientIP()); blocked && !a.auth.Recognizes(token) {
			a.failures.record(c, "address_limited")
			c.Header("Retry-After", retryAfterSeconds(wait))
			writeProblem(c, withType(Problem{Status: http.StatusTooManyRequests, Code: CodeRateLimited,
				Detail: "too many failed authentications from this address; retry after Retry-After seconds"}))
			return auth.Principal{}, false
		}
	}
	p, err := a.auth.Authenticate(c.Request.Context(), token)
	var failure *auth.Failure
	switch {
	case errors.As(err, &failure):
		if a.guard != nil {
			a.guard.failed(c.ClientIP())
		}
		a.failures.record(c, failure.Reason)
		writeProblem(c, unauthorized())
		return p, false
	case errors.Is(err, auth.ErrTenantDisabled):
		writeProblem(c, withType(Problem{Status: http.StatusForbidden, Code: CodeTenantDisabled,
			Detail: "the token's tenant is disabled"}))
		return p, false
	case err != nil:
		writeError(c, err)
		return p, false
	}
	return p, true
}

func (a *authenticator) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		p, ok := a.principal(c)
		if !ok {
			return
		}
		ctx := auth.With(tenancy.With(c.Request.Context(), p.TenantID), p)
		c.Request = c.Request.WithContext(ctx)
		if a.limit != nil {
			allowed, wait, err := a.limit.Allow(ctx, p.TokenID)
			if err != nil {
				writeError(c, err)
				return
			}
			if !allowed {
				c.Header("Retry-After", retryAfterSeconds(wait))
				writeProblem(c, withType(Problem{Status: http.StatusTooManyRequests, Code: CodeRateLimited,
					Detail: "this token's request rate limit is reached; retry after Retry-After seconds"}))
				return
			}
		}
		c.Next()
	}
}

func retryAfterSeconds(d time.Duration) string {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.Itoa(s)
}

// requireScope refuses a principal without scope with 403 insufficient_scope; "" admits any token.
func requireScope(c *gin.Context, scope auth.Scope) error {
	if scope == "" {
		return nil
	}
	if p, ok := auth.From(c.Request.Context()); ok && p.Has(scope) {
		return nil
	}
	return newProblem(http.StatusForbidden, CodeInsufficientScope, "this token lacks the scope "+string(scope))
}

// RequireScope is requireScope as gin middleware, for routes declared the gin way.
func RequireScope(scope auth.Scope) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := requireScope(c, scope); err != nil {
			writeError(c, err)
			return
		}
		c.Next()
	}
}

// failureLimiter counts failed authentications per source address in fixed windows, in this
// replica's memory: it runs before the token is looked up, so it must cost no query itself.
type failureLimiter struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu    sync.Mutex
	addrs map[string]*failureWindow
}

type failureWindow struct {
	start time.Time
	count int
}

func newFailureLimiter(limit int, window time.Duration) *failureLimiter {
	if limit == 0 {
		limit, window = DefaultAuthFailureLimit, DefaultAuthFailureWindow
	}
	if limit < 0 {
		return nil
	}
	if window <= 0 {
		window = DefaultAuthFailureWindow
	}
	return &failureLimiter{limit: limit, window: window, now: time.Now, addrs: map[string]*failureWindow{}}
}

// blocked reports whether addr spent its failures in the current window, and how long that lasts.
func (l *failureLimiter) blocked(addr string) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.addrs[addr]
	if !ok || now.Sub(w.start) >= l.window || w.count < l.limit {
		return 0, false
	}
	return w.start.Add(l.window).Sub(now), true
}

// failed counts one failed authentication of addr.
func (l *failureLimiter) failed(addr string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.addrs[addr]
	if !ok || now.Sub(w.start) >= l.window {
		if !ok && len(l.addrs) >= maxFailureAddresses {
			for a, old := range l.addrs {
				if now.Sub(old.start) >= l.window {
					delete(l.addrs, a)
				}
			}
			if len(l.addrs) >= maxFailureAddresses {
				clear(l.addrs)
			}
		}
		w = &failureWindow{start: now}
		l.addrs[addr] = w
	}
	w.count++
}

// failureLog logs each failed authentication at DEBUG and, at most once a minute, a WARN summary of
// those since the last one, so a scanner neither floods the log nor goes unnoticed.
type failureLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	last   time.Time
	counts map[string]int
}

func (f *failureLog) record(c *gin.Context, reason string) {
	ctx := c.Request.Context()
	f.logger.DebugContext(ctx, "authentication failed", "reason", reason, "method", c.Request.Method,
		"path", c.Request.URL.Path, "client_ip", c.ClientIP(), "request_id", correlation.ID(ctx))
	now := time.Now()
	f.mu.Lock()
	if f.counts == nil {
		f.counts = map[string]int{}
	}
	f.counts[reason]++
	if now.Sub(f.last) < failureSummaryEvery {
		f.mu.Unlock()
		return
	}
	counts := f.counts
	f.counts, f.last = map[string]int{}, now
	f.mu.Unlock()
	total := 0
	reasons := make([]string, 0, len(counts))
	for r, n := range counts {
		total += n
		reasons = append(reasons, r+"="+strconv.Itoa(n))
	}
	sort.Strings(reasons)
	f.logger.WarnContext(ctx, "failed authentications", "count", total, "reasons", strings.Join(reasons, " "),
		"window", failureSummaryEvery.String())
}

// Forbidden answers 403 with code, for refusals a handler decides (insufficient_scope on a rule finer than a route's scope).
func Forbidden(code, detail string) error {
	return newProblem(http.StatusForbidden, code, detail)
}
