package auth_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/httpapi"
)

// BenchmarkTokenLookupOnGet times one authenticated GET through the whole engine with a bootstrap
// token, a stored token (its row cached), and a stored token under the PostgreSQL rate limit (one
// upsert per request); docs/performance.md#request-path-tracing-tokens-tenant-filter has the figures.
func BenchmarkTokenLookupOnGet(b *testing.B) {
	db := dbtest.New(b)
	store, err := auth.NewStore(db)
	if err != nil {
		b.Fatal(err)
	}
	_, stored, err := store.CreateToken(context.Background(), auth.NewToken{Tenant: "default", Scopes: []string{"webhooks:read"}})
	if err != nil {
		b.Fatal(err)
	}
	authn, err := auth.NewAuthenticator(auth.AuthenticatorOptions{DB: db, BootstrapTokens: []string{"bootstrap"}})
	if err != nil {
		b.Fatal(err)
	}
	limiter, err := auth.NewLimiter(db, 1<<30, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		token string
		limit httpapi.RateLimiter
	}{{"bootstrap token", "bootstrap", nil}, {"stored token", stored, nil}, {"stored token, rate limited", stored, limiter}} {
		b.Run(tc.name, func(b *testing.B) {
			engine, api, err := httpapi.NewEngine(httpapi.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
				Auth: authn, RateLimit: tc.limit, Metrics: prometheus.NewRegistry()})
			if err != nil {
				b.Fatal(err)
			}
			api.GET("/things/:id", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"id": c.Param("id"), "name": "thing"}) })
			req := httptest.NewRequest(http.MethodGet, "/api/v1/things/42", nil)
			req.Header.Set("Authorization", "Bearer "+tc.token)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				w := httptest.NewRecorder()
				engine.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}
