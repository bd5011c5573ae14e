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
	var after *conversationCursor
	if page.Cursor != "" {
		after = &conversationCursor{}
		if err := httpapi.DecodeCursor(page.Cursor, after); err != nil {
			return err
		}
	}
	items, next, err := h.service.List(c.Request.Context(), after, page.Limit)
	if err != nil {
		return err
	}
	out := make([]conversationResponse, len(items))
	for i := range items {
		out[i] = toConversationResponse(&items[i])
	}
	c.JSON(http.StatusOK, httpapi.NewList(out, encodeCursor(next)))
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
	conv, err := h.service.Rename(c.Request.Context(), id, *req.Title, ifMatch(c))
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
	if err := h.service.Delete(c.Request.Context(), id, ifMatch(c)); err != nil {
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
	c.Header("Location", httpapi.APIPrefix+"/conversations/"+id.String()+"/messages")
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
	var after *messageCursor
	if page.Cursor != "" {
		after = &messageCursor{}
		if err := httpapi.DecodeCursor(page.Cursor, after); err != nil {
			return err
		}
	}
	items, next, err := h.service.Messages(c.Request.Context(), id, after, page.Limit)
	if err != nil {
		return err
	}
	out := make([]messageResponse, len(items))
	for i := range items {
		out[i] = toMessageResponse(&items[i])
	}
	c.JSON(http.StatusOK, httpapi.NewList(out, encodeCursor(next)))
	return nil
}

func writeConversation(c *gin.Context, status int, conv *Conversation) {
	httpapi.SetETag(c, conv.Version())
	c.JSON(status, toConversationResponse(conv))
}

// ifMatch checks the request's If-Match against the version the service reads inside its unit of work.
func ifMatch(c *gin.Context) Precondition {
	return func(current string) error { return httpapi.IfMatch(c, current) }
}

func requireField(v *string, field string) error {
	if v == nil {
		return apperr.Invalid(field, "is required")
	}
	return nil
}

// encodeCursor turns a next-page position into the opaque cursor, "" on the last page.
func encodeCursor[T any](next *T) string {
	if next == nil {
		return ""
	}
	return httpapi.EncodeCursor(next)
}
