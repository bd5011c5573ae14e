package assistant_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/modules/conversations/assistant"
	"github.com/keelson/keelson/modules/proposals/contract"
)

func TestOpenAIToolCallBecomesAction(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/v1/chat/completions", r.URL.Path)
		assert.Equal(t, "Bearer sk-test", r.Header.Get("Authorization"))
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls",
			"message":{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"rename_conversation","arguments":"{\"title\":\"Budget 2027\"}"}},
				{"id":"call_2","type":"function","function":{"name":"drop_database","arguments":"{}"}}]}}]}`))
	}))
	defer srv.Close()

	ai, err := assistant.NewOpenAI(assistant.OpenAIConfig{BaseURL: srv.URL + "/v1/", Model: "test-model", APIKey: "sk-test"})
	require.NoError(t, err)
	reply, err := ai.Reply(context.Background(), assistant.Request{
		ConversationTitle: "Untitled",
		History: []assistant.Turn{
			{Role: assistant.RoleUser, Content: "hi"},
			{Role: assistant.RoleAssistant, Content: "hello"},
			{Role: assistant.RoleUser, Content: "call it Budget 2027"},
		},
	})
	require.NoError(t, err)
	require.Len(t, reply.Actions, 1, "the unknown tool is not proposed")
	assert.Equal(t, contract.ActionRenameConversation, reply.Actions[0].Type)
	assert.JSONEq(t, `{"title":"Budget 2027"}`, string(reply.Actions[0].Params))
	assert.NotEmpty(t, reply.Text)
	assert.Contains(t, reply.Rationale, "drop_database")

	assert.Equal(t, "test-model", got["model"])
	msgs := got["messages"].([]any)
	require.Len(t, msgs, 4, "system prompt + history")
	assert.Equal(t, "system", msgs[0].(map[string]any)["role"])
	assert.Equal(t, "call it Budget 2027", msgs[3].(map[string]any)["content"])
	assert.Len(t, got["tools"], 2)
}

func TestOpenAIErrorsNameStatusAndBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"upstream overloaded"}}` + strings.Repeat("x", 2000)))
	}))
	defer srv.Close()
	ai, err := assistant.NewOpenAI(assistant.OpenAIConfig{BaseURL: srv.URL, Model: "m"})
	require.NoError(t, err)
	_, err = ai.Reply(context.Background(), assistant.Request{History: []assistant.Turn{{Role: "user", Content: "x"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "status 500")
	assert.Contains(t, err.Error(), "upstream overloaded")
	assert.Less(t, len(err.Error()), 800, "the body is excerpted")
}

func TestOpenAITimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ai, err := assistant.NewOpenAI(assistant.OpenAIConfig{BaseURL: srv.URL, Model: "m", Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	start := time.Now()
	_, err = ai.Reply(context.Background(), assistant.Request{History: []assistant.Turn{{Role: "user", Content: "x"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Timeout")
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestOpenAIConfigChecked(t *testing.T) {
	_, err := assistant.NewOpenAI(assistant.OpenAIConfig{BaseURL: "localhost:1234", Model: "m"})
	assert.Error(t, err)
	_, err = assistant.NewOpenAI(assistant.OpenAIConfig{BaseURL: "http://127.0.0.1:1"})
	assert.Error(t, err)
}
