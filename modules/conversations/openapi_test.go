package conversations_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/conversations"
	"github.com/keelson/keelson/modules/proposals"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/module"
)

// TestOpenAPICoversRoutes: the document generated from the route declarations of conversations and
// proposals describes exactly the routes they mount, and validates.
func TestOpenAPICoversRoutes(t *testing.T) {
	registry := module.NewRegistry(module.Deps{DB: &database.DB{}, Events: mustPublisher(t, &database.DB{}), Jobs: mustClient(t, &database.DB{}),
		Logger: hosttest.Logger(), Metrics: prometheus.NewRegistry()})
	conv, err := conversations.New(conversations.Config{})
	require.NoError(t, err)
	for _, m := range []module.Module{conv, proposals.New()} {
		require.NoError(t, m.Register(registry.For(m)))
	}
	engine, api, err := httpapi.NewEngine(httpapi.Options{Logger: hosttest.Logger(), Metrics: prometheus.NewRegistry()})
	require.NoError(t, err)
	for _, rs := range registry.RouteSets() {
		rs.Mount(api)
	}
	doc, err := api.Document(registry.Catalog().Docs())
	require.NoError(t, err)
	require.NoError(t, httpapi.CheckOpenAPI(engine, doc))
	hosttest.ParseContract(t, doc)
}
