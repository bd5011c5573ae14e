package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

type conversation struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   string    `json:"version"`
}

type message struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Content   string    `json:"content"`
	CreatedAt time.Time `json:"created_at"`
}

type proposal struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Action         struct {
		Type   string          `json:"type"`
		Params json.RawMessage `json:"params"`
	} `json:"action"`
	Rationale string    `json:"rationale"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason"`
	Error     string    `json:"error"`
	CreatedAt time.Time `json:"created_at"`
	Version   string    `json:"version"`
}

type conversationsData struct {
	Items []conversation
	Next  string
}

func (c *Console) conversations(g *gin.Context, s session) error {
	items, next, err := listPage[conversation](c.api, g, s.Token, "/conversations", 50, "/conversations")
	if err != nil {
		return err
	}
	data := conversationsData{Items: items, Next: next}
	c.render(g, http.StatusOK, "conversations", page{Title: "Conversations", Section: "conversations", Session: &s, Data: data})
	return nil
}

func (c *Console) createConversation(g *gin.Context, s session) error {
	title := strings.TrimSpace(g.PostForm("title"))
	if title == "" {
		return back(g, "/conversations", "error", "empty")
	}
	var conv conversation
	if err := c.api.do(g.Request, s.Token, call{method: http.MethodPost, path: "/conversations",
		body: map[string]string{"title": title}, idempotencyKey: formKey(g)}, &conv); err != nil {
		return err
	}
	return back(g, "/conversations/"+escapePath(conv.ID), "notice", "created")
}

type conversationData struct {
	C         conversation
	Messages  []message
	More      string
	Pending   []proposal
	Decided   []proposal
	CanDecide bool
}

const messagesPerPage = 100

func (c *Console) conversation(g *gin.Context, s session) error {
	id := escapePath(g.Param("id"))
	var conv conversation
	if err := c.api.do(g.Request, s.Token, call{method: http.MethodGet, path: "/conversations/" + id}, &conv); err != nil {
		return err
	}
	msgs, more, err := listPage[message](c.api, g, s.Token, "/conversations/"+id+"/messages", messagesPerPage, "/conversations/"+id)
	if err != nil {
		return err
	}
	data := conversationData{C: conv, Messages: msgs, More: more,
		CanDecide: c.api.may(&s, http.MethodPost, "/assistant/proposals/:/accept")}
	var props list[proposal]
	err = c.api.do(g.Request, s.Token, call{method: http.MethodGet, path: "/assistant/proposals",
		query: url.Values{"conversation_id": {conv.ID}, "limit": {"50"}}}, &props)
	// A token that may read conversations but not proposals still sees the conversation.
	if err != nil && statusOf(err) != http.StatusForbidden {
		return err
	}
	for _, p := range props.Items {
		if p.Status == "pending" {
			data.Pending = append(data.Pending, p)
		} else {
			data.Decided = append(data.Decided, p)
		}
	}
	c.render(g, http.StatusOK, "conversation", page{Title: conv.Title, Section: "conversations", Session: &s, Data: data})
	return nil
}

func (c *Console) postMessage(g *gin.Context, s session) error {
	id := escapePath(g.Param("id"))
	content := strings.TrimSpace(g.PostForm("content"))
	if content == "" {
		return back(g, "/conversations/"+id, "error", "empty")
	}
	if err := c.api.do(g.Request, s.Token, call{method: http.MethodPost, path: "/conversations/" + id + "/messages",
		body: map[string]string{"content": content}, idempotencyKey: formKey(g)}, nil); err != nil {
		return err
	}
	return back(g, "/conversations/"+id, "notice", "posted")
}

// decide accepts or rejects the version of the proposal the page showed; whoever decided first
// wins, and the other sees "already decided".
func (c *Console) decide(g *gin.Context, s session) error {
	id := escapePath(g.Param("id"))
	decision := g.Param("decision")
	var body any = struct{}{}
	switch decision {
	case "accept":
	case "reject":
		if reason := strings.TrimSpace(g.PostForm("reason")); reason != "" {
			body = map[string]string{"reason": reason}
		}
	default:
		return &apiError{Status: http.StatusNotFound}
	}
	backTo := "/conversations"
	if conv := g.PostForm("conversation_id"); conv != "" {
		backTo += "/" + escapePath(conv)
	}
	err := c.api.do(g.Request, s.Token, call{method: http.MethodPost, path: "/assistant/proposals/" + id + "/" + decision,
		body: body, ifMatch: g.PostForm("version")}, nil)
	if conflicted(err) {
		return back(g, backTo, "error", "decided")
	}
	if err != nil {
		return err
	}
	return back(g, backTo, "notice", decision+"ed")
}

type eventType struct {
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	Description string          `json:"description"`
	Owner       string          `json:"owner"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
}

// Title is the event type's name under whichever key the API gives it.
func (e eventType) Title() string {
	if e.Name != "" {
		return e.Name
	}
	return e.Type
}

type eventTypesData struct {
	Items []eventType
	Next  string
}

func (c *Console) eventTypes(g *gin.Context, s session) error {
	if !c.api.may(&s, http.MethodGet, "/webhooks/event-types") {
		return &apiError{Status: http.StatusNotFound}
	}
	items, next, err := listPage[eventType](c.api, g, s.Token, "/webhooks/event-types", 200, "/event-types")
	if err != nil {
		return err
	}
	data := eventTypesData{Items: items, Next: next}
	c.render(g, http.StatusOK, "event_types", page{Title: "Event types", Section: "event-types", Session: &s, Data: data})
	return nil
}
