package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/httpapi"
)

// widgetRoutes create a widget row in the request's unit of work; ?slow holds the transaction open a
// while, ?fail answers 500 after writing, so a test can see what is kept and what rolls back.
func widgetRoutes(db *database.DB) func(api *gin.RouterGroup) {
	return func(api *gin.RouterGroup) {
		api.POST("/widgets", httpapi.H(func(c *gin.Context) error {
			var in struct {
				Name string `json:"name"`
			}
			if err := httpapi.BindJSON(c, &in); err != nil {
				return err
			}
			if in.Name == "" {
				return httpapi.InvalidQuery("name", "must not be empty")
			}
			id := uuid.New()
			err := db.WithTx(c.Request.Context(), func(ctx context.Context) error {
				if c.Query("slow") != "" {
					if err := db.Conn(ctx).Exec("SELECT pg_sleep(0.3)").Error; err != nil {
						return err
					}
				}
				return db.Conn(ctx).Exec("INSERT INTO widgets (id, name) VALUES (?, ?)", id, in.Name).Error
			})
			if err != nil {
				return err
			}
			if c.Query("fail") != "" {
				return fmt.Errorf("exploded after the insert")
			}
			c.Header("Location", "/api/v1/widgets/"+id.String())
			c.JSON(http.StatusCreated, gin.H{"id": id, "name": in.Name})
			return nil
		}))
	}
}

// idempotentReplicas are two engines on two pools of one database: two replicas.
func idempotentReplicas(t *testing.T) (a, b *server, count func() int64) {
	t.Helper()
	d := dbtest.Create(t)
	dbA, dbB := d.Open(t), d.Open(t)
	require.NoError(t, dbA.Gorm().Exec("CREATE TABLE widgets (id uuid PRIMARY KEY, name text NOT NULL)").Error)
	a = newServerWithRoutes(t, widgetRoutes(dbA), func(o *httpapi.Options) { o.DB = dbA })
	b = newServerWithRoutes(t, widgetRoutes(dbB), func(o *httpapi.Options) { o.DB = dbB })
	return a, b, func() int64 {
		var n int64
		require.NoError(t, dbA.Gorm().Raw("SELECT count(*) FROM widgets").Scan(&n).Error)
		return n
	}
}

func postWidget(t *testing.T, srv *server, query, key, body string) response {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h[httpapi.IdempotencyKeyHeader] = key
	}
	return srv.do(t, http.MethodPost, "/api/v1/widgets"+query, token, strings.NewReader(body), h)
}

func TestTwentyConcurrentRequestsWithOneIdempotencyKeyOnTwoReplicasHaveOneEffect(t *testing.T) {
	a, b, count := idempotentReplicas(t)
	key := uuid.NewString()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		responses []response
	)
	for i := range 20 {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := postWidget(t, srv, "?slow=1", key, `{"name":"one"}`)
			mu.Lock()
			responses = append(responses, r)
			mu.Unlock()
		}()
	}
	wg.Wait()

	assert.EqualValues(t, 1, count(), "one widget for one key")
	var created []response
	for _, r := range responses {
		switch r.status {
		case http.StatusCreated:
			created = append(created, r)
		case http.StatusConflict:
			assert.Equal(t, httpapi.CodeIdempotencyInProgress, r.problem.Code)
			assert.NotEmpty(t, r.header.Get("Retry-After"))
		default:
			t.Errorf("unexpected answer %d: %s", r.status, r.body)
		}
	}
	require.NotEmpty(t, created)
	for _, r := range created {
		assert.JSONEq(t, string(created[0].body), string(r.body), "every 201 is the one stored answer")
	}

	// Once done, the same key and body replay the stored status, headers and body, on either replica.
	for _, srv := range []*server{a, b} {
		r := postWidget(t, srv, "?slow=1", key, `{"name":"one"}`)
		assert.Equal(t, http.StatusCreated, r.status)
		assert.JSONEq(t, string(created[0].body), string(r.body))
		assert.Equal(t, created[0].header.Get("Location"), r.header.Get("Location"))
		assert.Equal(t, "application/json; charset=utf-8", r.header.Get("Content-Type"))
		assert.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	}
	assert.EqualValues(t, 1, count())
}

func TestAnIdempotencyKeyReusedWithAnotherBodyIs422(t *testing.T) {
	a, b, count := idempotentReplicas(t)
	key := `"` + uuid.NewString() + `"` // the structured-field form is accepted as well as the bare one
	require.Equal(t, http.StatusCreated, postWidget(t, a, "", key, `{"name":"one"}`).status)

	r := postWidget(t, b, "", key, `{"name":"two"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, r.status)
	assert.Equal(t, httpapi.CodeIdempotencyKeyReused, r.problem.Code)
	r = postWidget(t, b, "?other=query", key, `{"name":"one"}`)
	assert.Equal(t, http.StatusCreated, r.status, "the query string is not part of the request's identity")
	assert.EqualValues(t, 1, count())

	// Without a key, or with another key, every POST has its effect.
	require.Equal(t, http.StatusCreated, postWidget(t, a, "", "", `{"name":"one"}`).status)
	require.Equal(t, http.StatusCreated, postWidget(t, a, "", uuid.NewString(), `{"name":"one"}`).status)
	assert.EqualValues(t, 3, count())

	r = postWidget(t, a, "", strings.Repeat("k", 256), `{"name":"one"}`)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, httpapi.CodeInvalidIdempotencyKey, r.problem.Code)
}

func TestAFailedIdempotentRequestIsRolledBackAndMayBeRetried(t *testing.T) {
	a, b, count := idempotentReplicas(t)
	key := uuid.NewString()

	r := postWidget(t, a, "?fail=1", key, `{"name":"one"}`)
	assert.Equal(t, http.StatusInternalServerError, r.status)
	assert.EqualValues(t, 0, count(), "the 500's insert rolled back with it")

	// A stored 4xx replays; the 500 was not stored, so the retry runs.
	r = postWidget(t, b, "", key, `{"name":"one"}`)
	assert.Equal(t, http.StatusCreated, r.status, string(r.body))
	assert.EqualValues(t, 1, count())

	badKey := uuid.NewString()
	assert.Equal(t, http.StatusBadRequest, postWidget(t, a, "", badKey, `{"name":""}`).status)
	r = postWidget(t, b, "", badKey, `{"name":""}`)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
}

func TestAnIdempotencyClaimWhoseRequestDiedIsTakenOverAndOldKeysArePruned(t *testing.T) {
	d := dbtest.Create(t)
	db := d.Open(t)
	require.NoError(t, db.Gorm().Exec("CREATE TABLE widgets (id uuid PRIMARY KEY, name text NOT NULL)").Error)
	srv := newServerWithRoutes(t, widgetRoutes(db), func(o *httpapi.Options) { o.DB = db })
	key := uuid.NewString()
	require.Equal(t, http.StatusCreated, postWidget(t, srv, "", key, `{"name":"one"}`).status)

	// A replica that died mid-request leaves a claim without a response; once its lock expires, a retry takes it.
	require.NoError(t, db.Gorm().Exec(`UPDATE idempotency_keys SET status = NULL, body = NULL, headers = NULL,
		lock_token = gen_random_uuid(), locked_until = now() - interval '1 second'`).Error)
	r := postWidget(t, srv, "", key, `{"name":"one"}`)
	assert.Equal(t, http.StatusCreated, r.status, string(r.body))
	assert.Empty(t, r.header.Get("Idempotent-Replayed"))

	require.NoError(t, db.Gorm().Exec(`UPDATE idempotency_keys SET created_at = now() - interval '25 hours'`).Error)
	other := uuid.NewString()
	require.Equal(t, http.StatusCreated, postWidget(t, srv, "", other, `{"name":"two"}`).status)
	pruned, err := httpapi.PruneIdempotencyKeys(t.Context(), db, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 1, pruned, "only the key past its lifetime")
	var left int64
	require.NoError(t, db.Gorm().Raw("SELECT count(*) FROM idempotency_keys").Scan(&left).Error)
	assert.EqualValues(t, 1, left)
}
