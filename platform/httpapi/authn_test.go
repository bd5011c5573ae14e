package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestFailedAuthenticationsAreLoggedAtDebugWithOneWarnSummaryAMinute(t *testing.T) {
	var logs hosttest.LogBuffer
	srv := conventionsServer(t, &logs)
	for _, token := range []string{"wrong", "kt_nope", "", "wrong-again"} {
		header := map[string]string{}
		if token != "" {
			header["Authorization"] = "Bearer " + token
		}
		resp, _ := do(t, http.MethodGet, srv.URL+"/api/v1/things/1", header)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	out := logs.String()
	assert.Equal(t, 4, strings.Count(out, `"level":"DEBUG","msg":"authentication failed"`), out)
	assert.Equal(t, 1, strings.Count(out, `"level":"WARN","msg":"failed authentications"`), "one summary within the minute:\n%s", out)
	assert.Contains(t, out, `"reason":"malformed"`)
	assert.Contains(t, out, `"reason":"missing"`)
	assert.NotContains(t, out, "wrong-again", "tokens are never logged")
}
