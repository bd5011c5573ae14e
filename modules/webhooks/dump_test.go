package webhooks

import (
	"context"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// TestAPgDumpOfAUsedDatabaseHoldsNoPlaintextSecretOrHeaderValue dumps the whole
// database after subscriptions were created with secrets and headers, rotated, sent to and deleted,
// and looks for every secret handed out (and its key's base64) and every header value.
func TestAPgDumpOfAUsedDatabaseHoldsNoPlaintextSecretOrHeaderValue(t *testing.T) {
	pgDump, err := exec.LookPath("pg_dump")
	if err != nil {
		t.Skip("pg_dump is not installed")
	}
	h := newHarness(t, testConfig(), harnessOptions{bus: true, jobs: true, secrets: testBox(t, testKey1)})
	rc := newReceiver(t, nil)
	handedOut := []string{testSecret}
	headerValues := []string{testHeaderSecret}
	var ids []string
	for i := range 3 {
		r := h.call(http.MethodPost, "/subscriptions", map[string]any{"url": rc.URL + "/hook", "event_types": []string{"order.*"},
			"headers": map[string]string{"X-Api-Key": "api-key-value-" + string(rune('a'+i)), "Authorization": testHeaderSecret}})
		require.Equal(t, http.StatusCreated, r.status, string(r.body))
		handedOut = append(handedOut, r.json(t)["secret"].(string))
		headerValues = append(headerValues, "api-key-value-"+string(rune('a'+i)))
		ids = append(ids, r.json(t)["id"].(string))
	}
	ids = append(ids, h.subscribeWithHeader(rc.URL+"/hook"))
	for _, id := range ids {
		for _, in := range []string{"1h", "48h"} {
			r := h.call(http.MethodPost, "/subscriptions/"+id+"/rotate-secret", map[string]any{"expire_previous_in": in})
			require.Equal(t, http.StatusOK, r.status, string(r.body))
			handedOut = append(handedOut, r.json(t)["secret"].(string))
		}
	}
	r := h.call(http.MethodPatch, "/subscriptions/"+ids[0], map[string]any{"headers": map[string]string{"X-Api-Key": "patched-key-value"}})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	headerValues = append(headerValues, "patched-key-value")
	require.Equal(t, http.StatusNoContent, h.call(http.MethodDelete, "/subscriptions/"+ids[1], nil).status)
	h.publish("order.created", map[string]any{"n": 1})
	hosttest.Eventually(t, 20*time.Second, func() bool { return rc.count() == len(ids)-1 }, "the live subscriptions got the event")

	u, err := url.Parse(h.database.URL)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dump, err := exec.CommandContext(ctx, pgDump, "--no-owner", "-h", "127.0.0.1", "-U", "postgres", strings.TrimPrefix(u.Path, "/")).Output()
	require.NoError(t, err)
	text := string(dump)
	require.True(t, strings.Contains(text, ids[2]), "the dump holds the subscriptions")
	require.True(t, strings.Contains(text, "v1:k1:"), "and their sealed values")
	for _, secret := range handedOut {
		require.False(t, strings.Contains(text, strings.TrimPrefix(secret, signing.Prefix)), "the dump holds the secret %s", secret)
	}
	for _, v := range headerValues {
		require.False(t, strings.Contains(text, v), "the dump holds the header value %q", v)
	}
	t.Logf("pg_dump: %d bytes, %d secrets and %d header values looked for", len(dump), len(handedOut), len(headerValues))
}
