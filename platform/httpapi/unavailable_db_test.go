package httpapi_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/url"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/httpapi"
)

// pingAs connects as the database URL says and returns PostgreSQL's (or the network's) real error.
func pingAs(ctx context.Context, rawURL string) error {
	db, err := sql.Open("pgx", rawURL)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func TestDatabaseUnavailabilityAnswers503WithRetryAfter(t *testing.T) {
	d := dbtest.Create(t)
	admin := d.Open(t)
	ctx := t.Context()

	// A role allowed no connection gets "too many connections for role" (53300), as a full server does.
	role := "keelson_full_" + uuid.NewString()[:8]
	require.NoError(t, admin.Gorm().Exec("CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 0").Error)
	t.Cleanup(func() { _ = admin.Gorm().Exec("DROP ROLE IF EXISTS " + role).Error })
	full, err := url.Parse(d.URL)
	require.NoError(t, err)
	full.User = url.User(role)

	refused, err := url.Parse(d.URL)
	require.NoError(t, err)
	refused.Host = "127.0.0.1:1" // nothing listens on port 1

	// A connection the server terminates (pg_terminate_backend is what a fast shutdown does) fails with 57P01.
	pool, err := sql.Open("pgx", d.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pool.Close() })
	conn, err := pool.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	var pid int
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid))

	srv := newServerWithRoutes(t, func(api *gin.RouterGroup) {
		api.GET("/full", httpapi.H(func(c *gin.Context) error { return pingAs(c, full.String()) }))
		api.GET("/refused", httpapi.H(func(c *gin.Context) error { return pingAs(c, refused.String()) }))
		api.GET("/terminated", httpapi.H(func(c *gin.Context) error {
			if err := admin.Gorm().Exec("SELECT pg_terminate_backend(?)", pid).Error; err != nil {
				return err
			}
			var one int
			return conn.QueryRowContext(c, "SELECT 1").Scan(&one)
		}))
	})

	for _, path := range []string{"/full", "/refused", "/terminated"} {
		t.Run(path, func(t *testing.T) {
			res := srv.do(t, http.MethodGet, "/api/v1"+path, token, nil, nil)
			assert.Equal(t, http.StatusServiceUnavailable, res.status, string(res.body))
			assert.Equal(t, httpapi.CodeDatabaseUnavailable, res.problem.Code)
			assert.Equal(t, httpapi.DatabaseRetryAfter, res.header.Get("Retry-After"))
		})
	}
}

func TestOrdinaryDatabaseErrorsAreNotUnavailability(t *testing.T) {
	db := dbtest.New(t)
	err := db.Gorm().Exec("SELECT * FROM no_such_table").Error
	require.Error(t, err)
	assert.False(t, database.IsUnavailable(err))
	assert.False(t, database.IsUnavailable(context.Canceled))
}
