package conversations

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
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
	Title *string `json:"title"`
}

type messageRequest struct {
	Content *string `json:"content"`
}

func toConversationResponse(c *Conversation) conversationResponse {
	return conversationResponse{ID: c.ID, Title: c.Title, CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(), Version: c.Version()}
}

func toMessageResponse(m *Message) messageResponse {
	return messageResponse{ID: m.ID, ConversationID: m.ConversationID, Role: m.Role, Content: m.Content, CreatedAt: m.CreatedAt.UTC()}
}

// handlers are the HTTP edge of the Service: decode, call, encode.
type handlers struct{ service *Service }

func (h *handlers) mount(api *gin.RouterGroup) {
	g := api.Group("/conversations")
	g.POST("", httpapi.H(h.create))
	g.GET("", httpapi.H(h.list))
	g.GET("/:id", httpapi.H(h.get))
	g.PATCH("/:id", httpapi.H(h.rename))
	g.DELETE("/:id", httpapi.H(h.delete))
	g.POST("/:id/messages", httpapi.H(h.postMessage))
	g.GET("/:id/messages", httpapi.H(h.messages))
	g.GET("/:id/messages/:message_id", httpapi.H(h.message))
}

func (h *handlers) create(c *gin.Context) error {
	var req titleRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		return err
	}
	if err := requireField(req.Title, "title"); err != nil {
		return err
	}
	conv, err := h.service.Create(c.Request.Context(), *req.Title)
	if err != nil {
		return err
	}
	c.Header("Location", httpapi.APIPrefix+"/conversations/"+conv.ID.String())
	writeConversation(c, http.StatusCreated, conv)
	return nil
}

func (h *handlers) list(c *gin.Context) error {
	page, err := httpapi.ParsePage(c)
	if err != nil {
		return err
	}
	items, next, err := httpapi.Paginate(page, func(after conversationCursor, limit int) ([]Conversation, error) {
		return h.service.List(c.Request.Context(), after, limit)
	}, func(last Conversation) conversationCursor { return conversationCursor{ID: last.ID} })
	if err != nil {
		return err
	}
	out := make([]conversationResponse, len(items))
	for i := range items {
		out[i] = toConversationResponse(&items[i])
	}
	c.JSON(http.StatusOK, httpapi.NewList(out, next))
	return nil
}

func (h *handlers) get(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	conv, err := h.service.Get(c.Request.Context(), id)
	if err != nil {
		return err
	}
	if httpapi.NotModified(c, conv.Version()) {
		return nil
	}
	writeConversation(c, http.StatusOK, conv)
	return nil
}

func (h *handlers) rename(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	var req titleRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		return err
	}
	if err := requireField(req.Title, "title"); err != nil {
		return err
	}
	conv, err := h.service.Rename(c.Request.Context(), id, *req.Title, httpapi.Precondition(c))
	if err != nil {
		return err
	}
	writeConversation(c, http.StatusOK, conv)
	return nil
}

func (h *handlers) delete(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	if err := h.service.Delete(c.Request.Context(), id, httpapi.Precondition(c)); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

func (h *handlers) postMessage(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	var req messageRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		return err
	}
	if err := requireField(req.Content, "content"); err != nil {
		return err
	}
	m, err := h.service.PostMessage(c.Request.Context(), id, *req.Content)
	if err != nil {
		return err
	}
	c.Header("Location", httpapi.APIPrefix+"/conversations/"+id.String()+"/messages/"+m.ID.String())
	c.JSON(http.StatusCreated, toMessageResponse(m))
	return nil
}

func (h *handlers) messages(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	page, err := httpapi.ParsePage(c)
	if err != nil {
		return err
	}
	items, next, err := httpapi.Paginate(page, func(after messageCursor, limit int) ([]Message, error) {
		return h.service.Messages(c.Request.Context(), id, after, limit)
	}, func(last Message) messageCursor { return messageCursor{CreatedAt: last.CreatedAt, ID: last.ID} })
	if err != nil {
		return err
	}
	out := make([]messageResponse, len(items))
	for i := range items {
		out[i] = toMessageResponse(&items[i])
	}
	c.JSON(http.StatusOK, httpapi.NewList(out, next))
	return nil
}

func (h *handlers) message(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	messageID, err := httpapi.PathUUID(c, "message_id")
	if err != nil {
		return err
	}
	m, err := h.service.Message(c.Request.Context(), id, messageID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, toMessageResponse(m))
	return nil
}

func writeConversation(c *gin.Context, status int, conv *Conversation) {
	httpapi.SetETag(c, conv.Version())
	c.JSON(status, toConversationResponse(conv))
}

func requireField(v *string, field string) error {
	if v == nil {
		return apperr.Invalid(field, "is required")
	}
	return nil
}
