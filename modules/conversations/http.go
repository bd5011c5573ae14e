package conversations

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/httpapi"
)

type conversationResponse struct {
	ID        uuid.UUID `json:"id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   string    `json:"version"`
}

type messageResponse struct {
	ID             uuid.UUID `json:"id"`
	ConversationID uuid.UUID `json:"conversation_id"`
	Role           string    `json:"role"`
	Content        string    `json:"content"`
	CreatedAt      time.Time `json:"created_at"`
}

type titleRequest struct {
	Title *string `json:"title" nullable:"false" minLength:"1" maxLength:"200"` // a pointer to tell absent from empty; null is refused
}

type messageRequest struct {
	Content *string `json:"content" nullable:"false" minLength:"1" maxLength:"100000"`
}

func toConversationResponse(c *Conversation) conversationResponse {
	return conversationResponse{ID: c.ID, Title: c.Title, CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(), Version: c.Version()}
}

func toMessageResponse(m *Message) messageResponse {
	return messageResponse{ID: m.ID, ConversationID: m.ConversationID, Role: m.Role, Content: m.Content, CreatedAt: m.CreatedAt.UTC()}
}

// handlers are the HTTP edge of the Service: decode, call, encode.
type handlers struct{ service *Service }

func (h *handlers) mount(api *httpapi.API) {
	g := api.Module("/conversations", "conversations").Scopes(auth.ConversationsRead, auth.ConversationsWrite)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "", ID: "createConversation",
		Summary: "Start a conversation.", Status: http.StatusCreated}, h.create)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "", ID: "listConversations",
		Summary: "List conversations, newest first."}, h.list)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/{id}", ID: "getConversation",
		Summary: "Get a conversation."}, h.get)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPatch, Path: "/{id}", ID: "renameConversation",
		Summary: "Rename a conversation."}, h.rename)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodDelete, Path: "/{id}", ID: "deleteConversation",
		Summary: "Delete a conversation and its messages.", Status: http.StatusNoContent}, h.delete)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/{id}/messages", ID: "postMessage",
		Summary: "Post a user message; the assistant's reply follows asynchronously.", Status: http.StatusCreated}, h.postMessage)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/{id}/messages", ID: "listMessages",
		Summary: "List a conversation's messages, oldest first."}, h.messages)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/{id}/messages/{message_id}", ID: "getMessage",
		Summary: "Get one message of a conversation."}, h.message)
}

type conversationOut = httpapi.Versioned[conversationResponse]

// conversationAnswer answers a conversation with its version as ETag, or the error that kept it.
func conversationAnswer(conv *Conversation, err error) (*conversationOut, error) {
	if err != nil {
		return nil, err
	}
	return &conversationOut{ETag: conv.Version(), Body: toConversationResponse(conv)}, nil
}

type createIn struct {
	Body titleRequest
}

func (h *handlers) create(ctx context.Context, in *createIn) (*httpapi.Created[conversationResponse], error) {
	if err := requireField(in.Body.Title, "title"); err != nil {
		return nil, err
	}
	conv, err := h.service.Create(ctx, *in.Body.Title)
	if err != nil {
		return nil, err
	}
	return &httpapi.Created[conversationResponse]{ETag: conv.Version(), Location: httpapi.APIPrefix + "/conversations/" + conv.ID.String(),
		Body: toConversationResponse(conv)}, nil
}

type listIn struct {
	Page httpapi.Page
}

func (h *handlers) list(ctx context.Context, in *listIn) (*httpapi.ListOut[conversationResponse], error) {
	return httpapi.PageOf(in.Page, func(after conversationCursor, limit int) ([]Conversation, error) {
		return h.service.List(ctx, after, limit)
	}, func(last Conversation) conversationCursor { return conversationCursor{ID: last.ID} }, toConversationResponse)
}

func (h *handlers) get(ctx context.Context, in *httpapi.ByID) (*conversationOut, error) {
	return conversationAnswer(h.service.Get(ctx, in.ID))
}

type renameIn struct {
	ID   uuid.UUID `path:"id"`
	If   concurrency.Precondition
	Body titleRequest
}

func (h *handlers) rename(ctx context.Context, in *renameIn) (*conversationOut, error) {
	if err := requireField(in.Body.Title, "title"); err != nil {
		return nil, err
	}
	return conversationAnswer(h.service.Rename(ctx, in.ID, *in.Body.Title, in.If))
}

type deleteIn struct {
	ID uuid.UUID `path:"id"`
	If concurrency.Precondition
}

type noContent struct{}

func (h *handlers) delete(ctx context.Context, in *deleteIn) (*noContent, error) {
	return &noContent{}, h.service.Delete(ctx, in.ID, in.If)
}

type postMessageIn struct {
	ID   uuid.UUID `path:"id"`
	Body messageRequest
}

type messageCreatedOut struct {
	Location string `header:"Location"`
	Body     messageResponse
}

func (h *handlers) postMessage(ctx context.Context, in *postMessageIn) (*messageCreatedOut, error) {
	if err := requireField(in.Body.Content, "content"); err != nil {
		return nil, err
	}
	m, err := h.service.PostMessage(ctx, in.ID, *in.Body.Content)
	if err != nil {
		return nil, err
	}
	return &messageCreatedOut{Location: httpapi.APIPrefix + "/conversations/" + in.ID.String() + "/messages/" + m.ID.String(),
		Body: toMessageResponse(m)}, nil
}

type messagesIn struct {
	ID   uuid.UUID `path:"id"`
	Page httpapi.Page
}

func (h *handlers) messages(ctx context.Context, in *messagesIn) (*httpapi.ListOut[messageResponse], error) {
	return httpapi.PageOf(in.Page, func(after messageCursor, limit int) ([]Message, error) {
		return h.service.Messages(ctx, in.ID, after, limit)
	}, func(last Message) messageCursor { return messageCursor{CreatedAt: last.CreatedAt, ID: last.ID} }, toMessageResponse)
}

type messageIn struct {
	ID        uuid.UUID `path:"id"`
	MessageID uuid.UUID `path:"message_id"`
}

type messageOut struct {
	Body messageResponse
}

func (h *handlers) message(ctx context.Context, in *messageIn) (*messageOut, error) {
	m, err := h.service.Message(ctx, in.ID, in.MessageID)
	if err != nil {
		return nil, err
	}
	return &messageOut{Body: toMessageResponse(m)}, nil
}

func requireField(v *string, field string) error {
	if v == nil {
		return apperr.Invalid(field, "is required")
	}
	return nil
}
