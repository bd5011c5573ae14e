package console

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/platform/correlation"
	"github.com/keelson/keelson/platform/httpapi"
)

func TestAnApiCallCarriesTheTokenTheVersionTheFormKeyAndThePageRequestId(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	engine := gin.New()
	var seen http.Header
	engine.POST("/api/v1/things/:id/act", func(c *gin.Context) {
		seen = c.Request.Header.Clone()
		c.JSON(http.StatusConflict, gin.H{"code": "concurrency_conflict", "detail": "changed"})
	})
	a := &api{engine: engine}
	a.routesOnce.Do(func() {
		a.routes = map[string]httpapi.Route{"act": {Method: http.MethodPost, Path: "/api/v1/things/{id}/act", ID: "act"}}
	})
	page := httptest.NewRequest(http.MethodPost, "/console/things/1", nil)
	page = page.WithContext(correlation.With(page.Context(), "page-request-1"))

	err := a.do(page, "tok", call{op: "act", params: []string{"1"}, body: struct{}{},
		ifMatch: "42", idempotencyKey: "form-key-0123456789"}, nil)
	if statusOf(err) != http.StatusConflict || !conflicted(err) || err.Error() != "changed" {
		t.Fatalf("err = %v (status %d)", err, statusOf(err))
	}
	for name, want := range map[string]string{"Authorization": "Bearer tok", "If-Match": `"42"`,
		"Idempotency-Key": "form-key-0123456789", "X-Request-Id": "page-request-1", "Content-Type": "application/json"} {
		if got := seen.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	anyScope := &session{}
	if !a.may(anyScope, "act") || a.may(anyScope, "other") {
		t.Error("may does not read the declared routes")
	}
}
