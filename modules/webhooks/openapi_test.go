package webhooks

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/outbox"
)

func TestTheOpenAPIDocumentDescribesExactlyTheMountedRoutes(t *testing.T) {
	db := dbtest.New(t, migrations.Sets(Name)...)
	pub, err := outbox.NewPublisher(db, nil)
	require.NoError(t, err)
	promReg := prometheus.NewRegistry()
	reg := module.NewRegistry(module.Deps{DB: db, Events: pub, Logger: testLogger(), Metrics: promReg})
	mod, err := New(DefaultConfig())
	require.NoError(t, err)
	require.NoError(t, mod.Register(reg.For(mod)))

	engine, api, err := httpapi.NewEngine(httpapi.Options{Logger: testLogger(), Metrics: promReg})
	require.NoError(t, err)
	for _, rs := range reg.RouteSets() {
		rs.Mount(api)
	}
	doc, err := api.Document(reg.Catalog().Docs())
	require.NoError(t, err)
	require.NoError(t, httpapi.CheckOpenAPI(engine, doc))
}
