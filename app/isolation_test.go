package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/examples/notes"
	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// tenantRows fingerprints every row of tenant in every table with a tenant_id, table by table.
func tenantRows(t *testing.T, db *database.DB, tenant string, skip ...string) map[string]string {
	t.Helper()
	var tables []string
	require.NoError(t, db.Gorm().Raw(`SELECT table_name FROM information_schema.columns
		WHERE table_schema = 'public' AND column_name = 'tenant_id' ORDER BY 1`).Scan(&tables).Error)
	out := map[string]string{}
	for _, table := range tables {
		if contains(skip, table) {
			continue
		}
		var sum *string
		require.NoError(t, db.Gorm().Raw(`SELECT md5(string_agg(r::text, '|' ORDER BY r::text)) FROM "`+table+`" r WHERE tenant_id = ?`, tenant).
			Scan(&sum).Error)
		out[table] = fmt.Sprint(sum)
		if sum != nil {
			out[table] = *sum
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestTenantAsTokensReachNothingOfTenantBOnAnyOperation(t *testing.T) {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	cfg.WebhooksAllowPrivateTargets = true
	cfg.WebhooksSweepInterval = 200 * time.Millisecond
	mods, err := modules(cfg)
	require.NoError(t, err)
	mods = append(mods, notes.New())
	sets := append(migrations.Sets("webhooks", "conversations", "proposals"),
		database.MigrationSet{Owner: "notes", FS: notes.New().Migrations()})
	db := dbtest.New(t, sets...)
	r := hosttest.Start(t, db, hosttest.Options{Background: true}, mods...)
	<-r.Ready()
	api := r.URL + "/api/v1"

	ids := map[string]string{} // what of B's the walk aims at, by name
	for _, name := range []string{"tenant-a", "tenant-b"} {
		a := call(t, http.MethodPost, api+"/admin/tenants", hosttest.Token, map[string]any{"name": name})
		require.Equal(t, http.StatusCreated, a.Status, a.Raw)
		ids[name] = a.Body["id"].(string)
	}
	delete(ids, "tenant-a") // A's own, which A may see
	tokenA := createToken(t, r.URL, "tenant-a", auth.AllScopes...)
	tokenB := createToken(t, r.URL, "tenant-b", allBut(auth.Admin)...)
	must := func(status int, a answer) answer {
		t.Helper()
		require.Equal(t, status, a.Status, a.Raw)
		return a
	}

	// B's resources, from B's own calls.
	sub := must(http.StatusCreated, call(t, http.MethodPost, api+"/webhooks/subscriptions", tokenB,
		map[string]any{"url": receiver.URL + "/b", "event_types": []string{"*"}}))
	ids["subscription"] = sub.Body["id"].(string)
	must(http.StatusAccepted, call(t, http.MethodPost, api+"/webhooks/events", tokenB, map[string]any{"type": "order.created", "data": map[string]any{"n": 1}}))
	conv := must(http.StatusCreated, call(t, http.MethodPost, api+"/conversations", tokenB, map[string]any{"title": "B's"}))
	ids["conversation"] = conv.Body["id"].(string)
	msg := must(http.StatusCreated, call(t, http.MethodPost, api+"/conversations/"+ids["conversation"]+"/messages", tokenB, map[string]any{"content": "/rename B renamed"}))
	ids["message"] = msg.Body["id"].(string)
	note := must(http.StatusCreated, call(t, http.MethodPost, api+"/notes", tokenB, map[string]any{"title": "B's note", "body": "x"}))
	ids["note"] = note.Body["id"].(string)
	op := must(http.StatusAccepted, call(t, http.MethodPost, api+"/webhooks/subscriptions/"+ids["subscription"]+"/recover", tokenB, map[string]any{"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}))
	ids["operation"] = op.Body["id"].(string)
	ids["token"] = strings.SplitN(tokenB, "_", 3)[1]
	ids["token"] = ids["token"][:8] + "-" + ids["token"][8:12] + "-" + ids["token"][12:16] + "-" + ids["token"][16:20] + "-" + ids["token"][20:]
	waitFor(t, 30*time.Second, func() bool {
		a := call(t, http.MethodGet, api+"/assistant/proposals?conversation_id="+ids["conversation"], tokenB, nil)
		items, _ := a.Body["items"].([]any)
		if len(items) == 0 {
			return false
		}
		ids["proposal"] = items[0].(map[string]any)["id"].(string)
		return true
	}, "B's proposal")
	waitFor(t, 30*time.Second, func() bool {
		a := call(t, http.MethodGet, api+"/webhooks/deliveries?status=succeeded", tokenB, nil)
		items, _ := a.Body["items"].([]any)
		if len(items) < 3 { // order.created, conversation.created, conversation.renamed-or-note
			return false
		}
		ids["delivery"] = items[0].(map[string]any)["id"].(string)
		return true
	}, "B's deliveries")
	waitFor(t, 30*time.Second, func() bool {
		a := call(t, http.MethodGet, api+"/webhooks/operations/"+ids["operation"], tokenB, nil)
		return a.Body["status"] == "succeeded" || a.Body["status"] == "failed"
	}, "B's recovery")
	// Background work of B's settles before the fingerprint: nothing of B's is due any more.
	churn := []string{"jobs", "outbox", "inbox", "messaging_inbox", "api_rate_windows"}
	var before map[string]string
	waitFor(t, 60*time.Second, func() bool {
		first := tenantRows(t, db, ids["tenant-b"], churn...)
		time.Sleep(time.Second)
		before = tenantRows(t, db, ids["tenant-b"], churn...)
		return fmt.Sprint(first) == fmt.Sprint(before)
	}, "B's rows to settle")

	bodies := map[string]any{
		"renameConversation": map[string]any{"title": "A was here"}, "postMessage": map[string]any{"content": "A was here"},
		"updateWebhookSubscription": map[string]any{"description": "A was here"}, "editNote": map[string]any{"title": "A was here"},
		"recoverWebhookSubscription": map[string]any{"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)},
	}
	target := func(path, param string) string {
		switch {
		case param == "{message_id}":
			return ids["message"]
		case strings.HasPrefix(path, "/api/v1/webhooks/subscriptions/"):
			return ids["subscription"]
		case strings.HasPrefix(path, "/api/v1/webhooks/deliveries/"):
			return ids["delivery"]
		case strings.HasPrefix(path, "/api/v1/webhooks/operations/"):
			return ids["operation"]
		case strings.HasPrefix(path, "/api/v1/conversations/"):
			return ids["conversation"]
		case strings.HasPrefix(path, "/api/v1/assistant/proposals/"):
			return ids["proposal"]
		case strings.HasPrefix(path, "/api/v1/notes/"):
			return ids["note"]
		case strings.HasPrefix(path, "/api/v1/admin/tokens/"):
			return ids["token"]
		case strings.HasPrefix(path, "/api/v1/admin/tenants/"):
			return ids["tenant-b"]
		}
		t.Fatalf("the walk knows no id of B's for %s in %s: add it", param, path)
		return ""
	}
	filters := "?conversation_id=" + ids["conversation"] + "&subscription_id=" + ids["subscription"]

	walked := 0
	for _, op := range apiOperations(t, r.URL) {
		if !strings.Contains(op.Path, "{") {
			if op.Method != http.MethodGet {
				continue // creates make A's own resources
			}
			a := call(t, op.Method, r.URL+op.Path+filters, tokenA, nil)
			assert.Contains(t, []int{http.StatusOK, http.StatusBadRequest, http.StatusForbidden}, a.Status, "%s %s: %s", op.Method, op.Path, a.Raw)
			for name, id := range ids {
				if name != "tenant-b" || op.ID != "listTenants" {
					assert.NotContains(t, a.Raw, id, "%s lists B's %s", op.ID, name)
				}
			}
			continue
		}
		url := r.URL + pathParam.ReplaceAllStringFunc(op.Path, func(p string) string { return target(op.Path, p) })
		var body any
		if b, ok := bodies[op.ID]; ok {
			body = b
		} else if op.Method == http.MethodPost {
			body = map[string]any{}
		}
		a := call(t, op.Method, url, tokenA, body)
		walked++
		switch a.Status {
		case http.StatusNotFound:
		case http.StatusForbidden:
			assert.Equal(t, "insufficient_scope", a.Body["code"], "%s: %s", op.ID, a.Raw)
		default:
			t.Errorf("%s %s with B's ids answered %d to A: %s", op.Method, op.Path, a.Status, a.Raw)
		}
	}
	require.Greater(t, walked, 20)

	// A's own traffic reaches A's subscription and nothing of B's.
	must(http.StatusCreated, call(t, http.MethodPost, api+"/webhooks/subscriptions", tokenA,
		map[string]any{"url": receiver.URL + "/a", "event_types": []string{"*"}}))
	must(http.StatusAccepted, call(t, http.MethodPost, api+"/webhooks/events", tokenA, map[string]any{"type": "order.created", "data": map[string]any{"n": 2}}))
	must(http.StatusCreated, call(t, http.MethodPost, api+"/conversations", tokenA, map[string]any{"title": "A's"}))
	waitFor(t, 30*time.Second, func() bool {
		a := call(t, http.MethodGet, api+"/webhooks/deliveries?status=succeeded", tokenA, nil)
		items, _ := a.Body["items"].([]any)
		return len(items) >= 2
	}, "A's deliveries of its event and its conversation.created")
	after := tenantRows(t, db, ids["tenant-b"], churn...)
	for table, sum := range before {
		assert.Equal(t, sum, after[table], "B's rows in %s changed", table)
	}
	raw, _ := json.Marshal(ids)
	t.Logf("B's ids walked: %s", raw)
}
