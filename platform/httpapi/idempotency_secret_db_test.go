package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
)

type keyIn struct {
	Body struct {
		Name string `json:"name"`
	}
}

type keyBody struct {
	ID     uuid.UUID `json:"id"`
	Name   string    `json:"name"`
	Secret string    `json:"secret,omitempty" secret:"true"`
}

// secretServer serves POST /api/v1/keys, which answers a fresh secret each time it runs, as creating a
// subscription or rotating its secret does.
func secretServer(t *testing.T, db *database.DB, runs *atomic.Int64) *server {
	t.Helper()
	opts := httpapi.Options{Logger: hosttest.Logger(), Tokens: []string{token}, DB: db, Metrics: prometheus.NewRegistry()}
	engine, api, err := httpapi.NewEngine(opts)
	require.NoError(t, err)
	g := api.Module("/keys", "Keys")
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "", ID: "createKey", Status: http.StatusCreated},
		func(_ context.Context, in *keyIn) (*httpapi.Created[keyBody], error) {
			runs.Add(1)
			id := uuid.New()
			return &httpapi.Created[keyBody]{Location: "/api/v1/keys/" + id.String(),
				Body: keyBody{ID: id, Name: in.Body.Name, Secret: "whsec_" + strings.ReplaceAll(uuid.NewString(), "-", "")}}, nil
		})
	srv := httptest.NewServer(engine)
	t.Cleanup(srv.Close)
	return &server{Server: srv, engine: engine}
}

func TestASecretInAnIdempotentAnswerIsNeverStoredAndAReplayOnAnotherReplicaLeavesItOut(t *testing.T) {
	d := dbtest.Create(t)
	dbA, dbB := d.Open(t), d.Open(t)
	var runs atomic.Int64
	a, b := secretServer(t, dbA, &runs), secretServer(t, dbB, &runs)
	key := uuid.NewString()
	post := func(srv *server) (response, keyBody) {
		r := srv.do(t, http.MethodPost, "/api/v1/keys", token, strings.NewReader(`{"name":"one"}`),
			map[string]string{"Content-Type": "application/json", httpapi.IdempotencyKeyHeader: key})
		var out keyBody
		require.NoError(t, json.Unmarshal(r.body, &out), string(r.body))
		return r, out
	}

	first, created := post(a)
	require.Equal(t, http.StatusCreated, first.status, string(first.body))
	require.NotEmpty(t, created.Secret, "the first answer shows the secret")
	assert.Empty(t, first.header.Get(httpapi.IdempotentRedactedHeader))

	var stored []byte
	require.NoError(t, dbA.Gorm().Raw("SELECT body FROM idempotency_keys").Row().Scan(&stored))
	assert.NotContains(t, string(stored), created.Secret, "the stored answer holds no secret")
	assert.NotContains(t, string(stored), `"secret"`)
	var dump string
	require.NoError(t, dbA.Gorm().Raw("SELECT string_agg(t::text, ' ') FROM idempotency_keys t").Row().Scan(&dump))
	assert.NotContains(t, dump, created.Secret, "no column of the key's row holds it")

	replay, again := post(b)
	assert.Equal(t, http.StatusCreated, replay.status)
	assert.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	assert.Equal(t, "secret", replay.header.Get(httpapi.IdempotentRedactedHeader), "the replay says what it left out")
	assert.Equal(t, first.header.Get("Location"), replay.header.Get("Location"))
	assert.Equal(t, created.ID, again.ID, "the same answer, the same effect")
	assert.Equal(t, created.Name, again.Name)
	assert.Empty(t, again.Secret, "a replay never shows the secret")
	assert.EqualValues(t, 1, runs.Load(), "the handler ran once")
}
