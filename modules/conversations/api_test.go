package conversations_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

type conversationBody struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   string    `json:"version"`
}

type messageBody struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversation_id"`
	Role           string    `json:"role"`
	Content        string    `json:"content"`
	CreatedAt      time.Time `json:"created_at"`
}

type list[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

const conversationsPath = "/api/v1/conversations"

func createConversation(t *testing.T, r *replica, title string) conversationBody {
	t.Helper()
	resp := r.Do(t, http.MethodPost, conversationsPath, map[string]any{"title": title})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	return hosttest.Decode[conversationBody](t, resp)
}

func TestConversationLifecycle(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{})

	created := r.Do(t, http.MethodPost, conversationsPath, map[string]any{"title": "  Roadmap  "})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	c := hosttest.Decode[conversationBody](t, created)
	assert.Equal(t, "Roadmap", c.Title, "surrounding spaces are trimmed")
	assert.Equal(t, `"`+c.Version+`"`, created.Header.Get("ETag"))
	assert.Equal(t, conversationsPath+"/"+c.ID, created.Header.Get("Location"))
	assert.Equal(t, int64(1), outboxCount(t, r.db, "conversation.created"))

	got := r.Do(t, http.MethodGet, conversationsPath+"/"+c.ID, nil)
	require.Equal(t, http.StatusOK, got.Status)
	assert.Equal(t, c, hosttest.Decode[conversationBody](t, got))
	assert.Equal(t, `"`+c.Version+`"`, got.Header.Get("ETag"))

	renamed := r.Do(t, http.MethodPatch, conversationsPath+"/"+c.ID, map[string]any{"title": "Roadmap 2027"}, "If-Match", `"`+c.Version+`"`)
	require.Equal(t, http.StatusOK, renamed.Status, "%s", renamed.Body)
	rc := hosttest.Decode[conversationBody](t, renamed)
	assert.Equal(t, "Roadmap 2027", rc.Title)
	assert.NotEqual(t, c.Version, rc.Version)
	assert.Equal(t, `"`+rc.Version+`"`, renamed.Header.Get("ETag"))
	assert.Equal(t, int64(1), outboxCount(t, r.db, "conversation.renamed"))

	posted := r.Do(t, http.MethodPost, conversationsPath+"/"+c.ID+"/messages", map[string]any{"content": "hello"})
	require.Equal(t, http.StatusCreated, posted.Status, "%s", posted.Body)
	m := hosttest.Decode[messageBody](t, posted)
	assert.Equal(t, "user", m.Role)
	assert.Equal(t, "hello", m.Content)
	assert.Equal(t, c.ID, m.ConversationID)
	assert.Equal(t, int64(1), outboxCount(t, r.db, "conversation.message.created"))
	assert.Equal(t, int64(1), hosttest.Count(t, r.db, `SELECT count(*) FROM jobs WHERE kind = 'conversations.assistant_reply' AND payload->>'message_id' = ?`, m.ID),
		"the reply job is enqueued with the message")

	after := hosttest.Decode[conversationBody](t, r.Do(t, http.MethodGet, conversationsPath+"/"+c.ID, nil))
	assert.NotEqual(t, rc.Version, after.Version, "posting a message touches the conversation")
	stale := r.Do(t, http.MethodPatch, conversationsPath+"/"+c.ID, map[string]any{"title": "x"}, "If-Match", `"`+rc.Version+`"`)
	assert.Equal(t, http.StatusPreconditionFailed, stale.Status, "an ETag from before the message is stale")

	msgs := hosttest.Decode[list[messageBody]](t, r.Do(t, http.MethodGet, conversationsPath+"/"+c.ID+"/messages", nil))
	require.Len(t, msgs.Items, 1)
	assert.Nil(t, msgs.NextCursor)

	del := r.Do(t, http.MethodDelete, conversationsPath+"/"+c.ID, nil, "If-Match", `"`+after.Version+`"`)
	assert.Equal(t, http.StatusNoContent, del.Status, "%s", del.Body)
	assert.Equal(t, http.StatusNotFound, r.Do(t, http.MethodGet, conversationsPath+"/"+c.ID, nil).Status)
	assert.Equal(t, http.StatusNotFound, r.Do(t, http.MethodGet, conversationsPath+"/"+c.ID+"/messages", nil).Status)
	assert.Equal(t, int64(0), hosttest.Count(t, r.db, `SELECT count(*) FROM conversation_messages`), "messages go with their conversation")
}

func TestListsPaginate(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{})
	var ids []string
	for i := range 5 {
		ids = append(ids, createConversation(t, r, fmt.Sprintf("c%d", i)).ID)
	}
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		path := conversationsPath + "?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		page := hosttest.Decode[list[conversationBody]](t, r.Do(t, http.MethodGet, path, nil))
		for _, c := range page.Items {
			seen = append(seen, c.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	require.Len(t, seen, 5)
	for i := range ids {
		assert.Equal(t, ids[len(ids)-1-i], seen[i], "newest first")
	}

	c := ids[0]
	for i := range 5 {
		resp := r.Do(t, http.MethodPost, conversationsPath+"/"+c+"/messages", map[string]any{"content": fmt.Sprintf("m%d", i)})
		require.Equal(t, http.StatusCreated, resp.Status)
	}
	var contents []string
	cursor = ""
	for {
		path := conversationsPath + "/" + c + "/messages?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		page := hosttest.Decode[list[messageBody]](t, r.Do(t, http.MethodGet, path, nil))
		for _, m := range page.Items {
			contents = append(contents, m.Content)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	assert.Equal(t, []string{"m0", "m1", "m2", "m3", "m4"}, contents, "oldest first")
}

// TestBadInputWritesNothing sends bad input to every route: each answer is a 4xx problem+json and
// no row, event or job is written.
func TestBadInputWritesNothing(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{})
	c := createConversation(t, r, "Target")
	item := conversationsPath + "/" + c.ID
	missing := conversationsPath + "/0190a0a0-0000-7000-8000-000000000000"
	long := strings.Repeat("x", 201)

	tests := []struct {
		name    string
		method  string
		path    string
		body    any
		headers []string
		status  int
		code    string
		field   string
	}{
		{"create: no title", "POST", conversationsPath, map[string]any{}, nil, 422, "validation_failed", "title"},
		{"create: empty title", "POST", conversationsPath, map[string]any{"title": ""}, nil, 422, "validation_failed", "title"},
		{"create: blank title", "POST", conversationsPath, map[string]any{"title": "   "}, nil, 422, "validation_failed", "title"},
		{"create: 201 characters", "POST", conversationsPath, map[string]any{"title": long}, nil, 422, "validation_failed", "title"},
		{"create: NUL in title", "POST", conversationsPath, map[string]any{"title": "a\u0000b"}, nil, 422, "validation_failed", "title"},
		{"create: title not a string", "POST", conversationsPath, map[string]any{"title": 42}, nil, 422, "validation_failed", "title"},
		{"create: unknown field", "POST", conversationsPath, map[string]any{"title": "x", "owner": "me"}, nil, 422, "validation_failed", "owner"},
		{"create: malformed JSON", "POST", conversationsPath, `{"title":`, nil, 400, "malformed_json", ""},
		{"create: array body", "POST", conversationsPath, `["x"]`, nil, 422, "validation_failed", ""},
		{"create: empty body", "POST", conversationsPath, "", nil, 400, "malformed_json", ""},
		{"create: text/plain", "POST", conversationsPath, `{"title":"x"}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", ""},
		{"create: too large", "POST", conversationsPath, `{"title":"` + strings.Repeat("x", 1<<20) + `"}`, nil, 413, "payload_too_large", ""},
		{"create: no token", "POST", conversationsPath, map[string]any{"title": "x"}, []string{"Authorization", ""}, 401, "unauthorized", ""},
		{"list: limit 0", "GET", conversationsPath + "?limit=0", nil, nil, 400, "invalid_query", "limit"},
		{"list: limit 201", "GET", conversationsPath + "?limit=201", nil, nil, 400, "invalid_query", "limit"},
		{"list: bad cursor", "GET", conversationsPath + "?cursor=!!!", nil, nil, 400, "invalid_query", "cursor"},
		{"list: foreign cursor", "GET", conversationsPath + "?cursor=eyJ4IjoxfQ", nil, nil, 400, "invalid_query", "cursor"},
		{"get: not a UUID", "GET", conversationsPath + "/nope", nil, nil, 404, "not_found", ""},
		{"get: missing", "GET", missing, nil, nil, 404, "not_found", ""},
		{"patch: not a UUID", "PATCH", conversationsPath + "/nope", map[string]any{"title": "x"}, nil, 404, "not_found", ""},
		{"patch: missing", "PATCH", missing, map[string]any{"title": "x"}, nil, 404, "not_found", ""},
		{"patch: no title", "PATCH", item, map[string]any{}, nil, 422, "validation_failed", "title"},
		{"patch: null title", "PATCH", item, `{"title":null}`, nil, 422, "validation_failed", "title"},
		{"patch: 201 characters", "PATCH", item, map[string]any{"title": long}, nil, 422, "validation_failed", "title"},
		{"patch: unknown field", "PATCH", item, map[string]any{"title": "x", "version": "1"}, nil, 422, "validation_failed", "version"},
		{"patch: malformed", "PATCH", item, `{`, nil, 400, "malformed_json", ""},
		{"patch: stale If-Match", "PATCH", item, map[string]any{"title": "x"}, []string{"If-Match", `"123"`}, 412, "precondition_failed", ""},
		{"patch: weak If-Match", "PATCH", item, map[string]any{"title": "x"}, []string{"If-Match", `W/"` + c.Version + `"`}, 412, "precondition_failed", ""},
		{"delete: stale If-Match", "DELETE", item, nil, []string{"If-Match", `"123"`}, 412, "precondition_failed", ""},
		{"delete: not a UUID", "DELETE", conversationsPath + "/nope", nil, nil, 404, "not_found", ""},
		{"delete: missing", "DELETE", missing, nil, nil, 404, "not_found", ""},
		{"message: missing conversation", "POST", missing + "/messages", map[string]any{"content": "hi"}, nil, 404, "not_found", ""},
		{"message: not a UUID", "POST", conversationsPath + "/nope/messages", map[string]any{"content": "hi"}, nil, 404, "not_found", ""},
		{"message: no content", "POST", item + "/messages", map[string]any{}, nil, 422, "validation_failed", "content"},
		{"message: empty content", "POST", item + "/messages", map[string]any{"content": ""}, nil, 422, "validation_failed", "content"},
		{"message: blank content", "POST", item + "/messages", map[string]any{"content": " \n\t"}, nil, 422, "validation_failed", "content"},
		{"message: NUL", "POST", item + "/messages", map[string]any{"content": "a\u0000"}, nil, 422, "validation_failed", "content"},
		{"message: role field", "POST", item + "/messages", map[string]any{"content": "hi", "role": "assistant"}, nil, 422, "validation_failed", "role"},
		{"message: malformed", "POST", item + "/messages", `{"content"`, nil, 400, "malformed_json", ""},
		{"message: form body", "POST", item + "/messages", "content=hi", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", ""},
		{"messages: bad limit", "GET", item + "/messages?limit=abc", nil, nil, 400, "invalid_query", "limit"},
		{"messages: bad cursor", "GET", item + "/messages?cursor=abc", nil, nil, 400, "invalid_query", "cursor"},
		{"messages: missing conversation", "GET", missing + "/messages", nil, nil, 404, "not_found", ""},
	}
	snapshot := func() [4]int64 {
		return [4]int64{
			hosttest.Count(t, r.db, `SELECT count(*) FROM conversations`),
			hosttest.Count(t, r.db, `SELECT count(*) FROM conversation_messages`),
			hosttest.Count(t, r.db, `SELECT count(*) FROM outbox_messages`),
			hosttest.Count(t, r.db, `SELECT count(*) FROM jobs`),
		}
	}
	before := snapshot()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := r.Do(t, tt.method, tt.path, tt.body, tt.headers...)
			require.Equal(t, tt.status, resp.Status, "%s", resp.Body)
			assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			p := hosttest.Decode[hosttest.Problem](t, resp)
			assert.Equal(t, tt.status, p.Status)
			assert.Equal(t, tt.code, p.Code)
			if tt.field != "" {
				require.NotEmpty(t, p.Errors, "%s", resp.Body)
				assert.Equal(t, tt.field, p.Errors[0].Field)
			}
		})
	}
	assert.Equal(t, before, snapshot(), "rows, events and jobs unchanged")
	got := hosttest.Decode[conversationBody](t, r.Do(t, http.MethodGet, item, nil))
	assert.Equal(t, c, got, "the conversation is unchanged")
}
