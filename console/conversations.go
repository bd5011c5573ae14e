package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/keelson/keelson/modules/conversations"
	"github.com/keelson/keelson/modules/proposals"
	"github.com/keelson/keelson/modules/webhooks"
)

// The modules' own shapes.
type (
	conversation = conversations.ConversationResponse
	message      = conversations.MessageResponse
	proposal     = proposals.ProposalResponse
)

type conversationsData struct {
	Items     []conversation
	Next      string
	CanCreate bool
}

func (c *Console) conversations(g *gin.Context, s session) error {
	items, next, err := listPage[conversation](c.api, g, s.Token, call{op: conversations.OpListConversations}, 50, "/conversations")
	if err != nil {
		return err
	}
	data := conversationsData{Items: items, Next: next, CanCreate: c.api.may(&s, conversations.OpCreateConversation)}
	c.render(g, http.StatusOK, "conversations", page{Title: "Conversations", Section: "conversations", Session: &s, Data: data})
	return nil
}

func (c *Console) createConversation(g *gin.Context, s session) error {
	title := strings.TrimSpace(g.PostForm("title"))
	if title == "" {
		return back(g, "/conversations", "error", "empty")
	}
	var conv conversation
	if err := c.api.do(g.Request, s.Token, call{op: conversations.OpCreateConversation,
		body: conversations.TitleRequest{Title: &title}, idempotencyKey: formKey(g)}, &conv); err != nil {
		return err
	}
	return back(g, "/conversations/"+conv.ID.String(), "notice", "created")
}

type conversationData struct {
	C         conversation
	Messages  []message
	More      string
	Pending   []proposal
	Decided   []proposal
	CanDecide bool
	CanPost   bool
}

const messagesPerPage = 100

func (c *Console) conversation(g *gin.Context, s session) error {
	id := escapePath(g.Param("id"))
	var conv conversation
	if err := c.api.do(g.Request, s.Token, call{op: conversations.OpGetConversation, params: []string{g.Param("id")}}, &conv); err != nil {
		return err
	}
	msgs, more, err := listPage[message](c.api, g, s.Token, call{op: conversations.OpListMessages, params: []string{g.Param("id")}}, messagesPerPage, "/conversations/"+id)
	if err != nil {
		return err
	}
	data := conversationData{C: conv, Messages: msgs, More: more,
		CanDecide: c.api.may(&s, proposals.OpAcceptProposal), CanPost: c.api.may(&s, conversations.OpPostMessage)}
	var props list[proposal]
	err = c.api.do(g.Request, s.Token, call{op: proposals.OpListProposals,
		query: url.Values{"conversation_id": {conv.ID.String()}, "limit": {"50"}}}, &props)
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
	if err := c.api.do(g.Request, s.Token, call{op: conversations.OpPostMessage, params: []string{g.Param("id")},
		body: conversations.MessageRequest{Content: &content}, idempotencyKey: formKey(g)}, nil); err != nil {
		return err
	}
	return back(g, "/conversations/"+id, "notice", "posted")
}

// decide accepts or rejects the version of the proposal the page showed; whoever decided first
// wins, and the other sees "already decided".
func (c *Console) decide(g *gin.Context, s session) error {
	decision := g.Param("decision")
	var body any = struct{}{}
	op := proposals.OpAcceptProposal
	switch decision {
	case "accept":
	case "reject":
		op = proposals.OpRejectProposal
		if reason := strings.TrimSpace(g.PostForm("reason")); reason != "" {
			body = proposals.RejectRequest{Reason: reason}
		}
	default:
		return &apiError{Status: http.StatusNotFound}
	}
	backTo := "/conversations"
	if conv := g.PostForm("conversation_id"); conv != "" {
		backTo += "/" + escapePath(conv)
	}
	err := c.api.do(g.Request, s.Token, call{op: op, params: []string{g.Param("id")},
		body: body, ifMatch: g.PostForm("version")}, nil)
	if conflicted(err) {
		return back(g, backTo, "error", "decided")
	}
	if err != nil {
		return err
	}
	return back(g, backTo, "notice", decision+"ed")
}

type eventType = webhooks.EventTypeResponse

type eventTypesData struct {
	Items []eventType
	Next  string
}

func (c *Console) eventTypes(g *gin.Context, s session) error {
	if !c.api.may(&s, webhooks.OpListEventTypes) {
		return &apiError{Status: http.StatusNotFound}
	}
	items, next, err := listPage[eventType](c.api, g, s.Token, call{op: webhooks.OpListEventTypes}, 200, "/event-types")
	if err != nil {
		return err
	}
	data := eventTypesData{Next: next}
	for _, e := range items {
		if s.Portal.sees(e.Type) {
			data.Items = append(data.Items, e)
		}
	}
	c.render(g, http.StatusOK, "event_types", page{Title: "Event types", Section: "event-types", Session: &s, Data: data})
	return nil
}
