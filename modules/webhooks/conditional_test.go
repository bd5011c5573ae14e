package webhooks

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAConditionalReadOfTheCurrentVersionAnswersNotModified(t *testing.T) {
	h := newHarness(t, testConfig(), harnessOptions{})
	id, _ := h.subscribe("http://127.0.0.1:9/hook", "a.*")
	got := h.call(http.MethodGet, "/subscriptions/"+id, nil)
	require.Equal(t, http.StatusOK, got.status)
	etag := got.header.Get("ETag")
	fresh := h.call(http.MethodGet, "/subscriptions/"+id, nil, "If-None-Match", etag)
	require.Equal(t, http.StatusNotModified, fresh.status)
	require.Empty(t, fresh.body)
	require.Equal(t, etag, fresh.header.Get("ETag"))

	patched := h.call(http.MethodPatch, "/subscriptions/"+id, map[string]any{"description": "changed"}, "If-Match", etag)
	require.Equal(t, http.StatusOK, patched.status)
	require.Equal(t, http.StatusOK, h.call(http.MethodGet, "/subscriptions/"+id, nil, "If-None-Match", etag).status, "a stale copy gets the new body")
}
