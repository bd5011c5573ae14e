package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/tenancy"
)

// tokenLookups counts the statements of a pool that read api_tokens: what a token lookup costs.
type tokenLookups struct{ n atomic.Int64 }

func (c *tokenLookups) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "FROM api_tokens") {
		c.n.Add(1)
	}
	return ctx
}

func (c *tokenLookups) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func madeUpToken() string {
	return auth.TokenPrefix + strings.ReplaceAll(uuid.NewString(), "-", "") + "_guess"
}

func TestMadeUpTokensFromOneAddressGet429AfterTheLimitAndCostNoFurtherQueries(t *testing.T) {
	const limit = 5
	d := dbtest.Create(t)
	var lookupsA, lookupsB tokenLookups
	dbA, dbB := d.OpenTraced(t, &lookupsA), d.OpenTraced(t, &lookupsB)
	store, err := auth.NewStore(dbA)
	require.NoError(t, err)
	_, known, err := store.CreateToken(t.Context(), auth.NewToken{Tenant: tenancy.DefaultName, Scopes: []string{"webhooks:read"}})
	require.NoError(t, err)
	_, unseen, err := store.CreateToken(t.Context(), auth.NewToken{Tenant: tenancy.DefaultName, Scopes: []string{"webhooks:read"}})
	require.NoError(t, err)

	replica := func(db *database.DB) *server {
		authn, err := auth.NewAuthenticator(auth.AuthenticatorOptions{DB: db, BootstrapTokens: []string{token}})
		require.NoError(t, err)
		return newServerWithRoutes(t, func(api *gin.RouterGroup) {
			api.GET("/me", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"ok": true}) })
		}, func(o *httpapi.Options) {
			o.Auth, o.AuthFailureLimit, o.AuthFailureWindow = authn, limit, time.Minute
		})
	}
	a, b := replica(dbA), replica(dbB)
	get := func(srv *server, tok string) response {
		return srv.do(t, http.MethodGet, "/api/v1/me", tok, nil, nil)
	}
	require.Equal(t, http.StatusOK, get(a, known).status, "a real token, read once by replica a")
	base := lookupsA.n.Load()

	for i := range limit {
		r := get(a, madeUpToken())
		require.Equal(t, http.StatusUnauthorized, r.status, "failure %d is within the limit", i+1)
	}
	assert.EqualValues(t, limit, lookupsA.n.Load()-base, "one lookup per made-up id within the limit")
	for range 100 {
		r := get(a, madeUpToken())
		require.Equal(t, http.StatusTooManyRequests, r.status)
		assert.Equal(t, httpapi.CodeRateLimited, r.problem.Code)
		assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
		assert.NotEmpty(t, r.header.Get("Retry-After"))
	}
	assert.EqualValues(t, limit, lookupsA.n.Load()-base, "past the limit made-up ids cost no query")
	assert.Equal(t, http.StatusTooManyRequests, get(a, "wrong-bootstrap-token").status, "guessing bootstrap tokens is bounded too")
	assert.Equal(t, http.StatusTooManyRequests, get(a, unseen).status,
		"a token this replica never read waits out the window: reading it would be a query")
	assert.Equal(t, http.StatusOK, get(a, known).status, "a token the replica knows valid still passes")
	assert.Equal(t, http.StatusOK, get(a, token).status, "so does a bootstrap token")

	// The bound is per replica; the other one's negative cache answers a repeated id from memory.
	again := madeUpToken()
	baseB := lookupsB.n.Load()
	for range 3 {
		assert.Equal(t, http.StatusUnauthorized, get(b, again).status)
	}
	assert.EqualValues(t, 1, lookupsB.n.Load()-baseB, "a repeated unknown id is looked up once per cache TTL")
	assert.Equal(t, http.StatusOK, get(b, unseen).status)
}

func TestTheFailureBoundCanBeTurnedOff(t *testing.T) {
	srv := newServer(t, func(o *httpapi.Options) { o.AuthFailureLimit = -1 })
	for i := range httpapi.DefaultAuthFailureLimit + 5 {
		r := srv.do(t, http.MethodGet, "/api/v1/things", fmt.Sprintf("bad-%d", i), nil, nil)
		require.Equal(t, http.StatusUnauthorized, r.status)
	}
}
