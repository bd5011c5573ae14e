package assistant_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/conversations/assistant"
	"github.com/keelson/keelson/modules/proposals/contract"
)

func TestBuiltinReplies(t *testing.T) {
	tests := []struct {
		name       string
		message    string
		actionType string
		params     string
	}{
		{name: "rename", message: "/rename Quarterly planning", actionType: contract.ActionRenameConversation, params: `{"title":"Quarterly planning"}`},
		{name: "rename trims", message: "  /rename   Spaced out  ", actionType: contract.ActionRenameConversation, params: `{"title":"Spaced out"}`},
		{name: "subscribe", message: "/subscribe https://example.test/hook proposal.*", actionType: contract.ActionCreateWebhookSubscription,
			params: `{"url":"https://example.test/hook","event_types":["proposal.*"]}`},
		{name: "plain", message: "hello there"},
		{name: "rename without title", message: "/rename"},
		{name: "rename too long", message: "/rename " + string(make([]byte, 201))},
		{name: "subscribe missing pattern", message: "/subscribe https://example.test/hook"},
		{name: "subscribe bad url", message: "/subscribe ftp://example.test proposal.*"},
		{name: "subscribe extra args", message: "/subscribe https://example.test/hook a b"},
		{name: "command must lead", message: "please /rename X"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := assistant.Request{History: []assistant.Turn{{Role: assistant.RoleUser, Content: tt.message}}}
			reply, err := assistant.NewBuiltin().Reply(context.Background(), req)
			require.NoError(t, err)
			assert.NotEmpty(t, reply.Text, "the built-in assistant replies to every message")
			again, err := assistant.NewBuiltin().Reply(context.Background(), req)
			require.NoError(t, err)
			assert.Equal(t, reply, again, "deterministic")
			if tt.actionType == "" {
				assert.Empty(t, reply.Actions)
				return
			}
			require.Len(t, reply.Actions, 1)
			assert.Equal(t, tt.actionType, reply.Actions[0].Type)
			assert.JSONEq(t, tt.params, string(reply.Actions[0].Params))
			assert.NotEmpty(t, reply.Rationale)
		})
	}
}

func TestCheckTitle(t *testing.T) {
	long := make([]rune, 200)
	for i := range long {
		long[i] = 'é'
	}
	assert.NoError(t, assistant.CheckTitle(string(long)), "200 characters, not bytes")
	assert.Error(t, assistant.CheckTitle(string(long)+"x"))
	assert.Error(t, assistant.CheckTitle("   "))
	assert.Error(t, assistant.CheckTitle("nul\x00byte"))
	assert.Error(t, assistant.CheckTitle("bad \xff utf8"))
	assert.NoError(t, assistant.CheckTitle("x"))
}

func TestActionParamsAreObjects(t *testing.T) {
	a, err := assistant.SubscribeAction("http://127.0.0.1:9/x", []string{"*"})
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(a.Params, &m))
	assert.Equal(t, "http://127.0.0.1:9/x", m["url"])
}
