package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/httpapi"
)

type scopeIn struct {
	ID string `path:"id"`
}

type scopeOut struct{}

func TestScopeOfNamesTheDeclaredRoutesOwnScopeElseItsGroupsForAnyParameterStyle(t *testing.T) {
	_, api, err := httpapi.NewEngine(httpapi.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tokens: []string{token}, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	g := api.Module("/things", "things").Scopes(auth.WebhooksRead, auth.WebhooksWrite)
	noop := func(context.Context, *scopeIn) (*scopeOut, error) { return &scopeOut{}, nil }
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/{id}/decide", ID: "decideThing", Scope: auth.ProposalsDecide}, noop)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/{id}", ID: "getThing"}, noop)
	g2 := api.Module("/open", "open")
	httpapi.Handle(g2, httpapi.Route{Method: http.MethodGet, Path: "/{id}", ID: "getOpen"}, noop)
	api.DELETE("/things/:id", func(c *gin.Context) {}) // declared the gin way: the group's write scope
	for _, c := range []struct {
		method, path string
		want         auth.Scope
	}{
		{http.MethodPost, "/api/v1/things/{id}/decide", auth.ProposalsDecide},
		{http.MethodPost, "/api/v1/things/:/decide", auth.ProposalsDecide},
		{http.MethodGet, "/api/v1/things/:id", auth.WebhooksRead},
		{http.MethodDelete, "/api/v1/things/:id", auth.WebhooksWrite},
		{http.MethodGet, "/api/v1/open/{id}", ""},
	} {
		if got := api.ScopeOf(c.method, c.path); got != c.want {
			t.Errorf("ScopeOf(%s %s) = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}
