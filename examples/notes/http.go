package notes

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/httpapi"
)

// noteRequest is the body of POST and PATCH; pointers tell "absent" from "empty".
type noteRequest struct {
	Title *string `json:"title"`
	Body  *string `json:"body"`
}

type noteResponse struct {
	ID             uuid.UUID  `json:"id"`
	ConversationID *uuid.UUID `json:"conversation_id"`
	Title          string     `json:"title"`
	Body           string     `json:"body"`
	WordCount      *int       `json:"word_count"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Version        string     `json:"version"`
}

// handlers are the HTTP edge: decode, call the service, encode. Errors go back to httpapi.H,
// which maps them to problem+json in one place.
type handlers struct{ service *Service }

func (h *handlers) mount(api *gin.RouterGroup) {
	g := api.Group("/notes")
	g.POST("", httpapi.H(h.create))
	g.GET("/:id", httpapi.H(h.get))
	g.PATCH("/:id", httpapi.H(h.edit))
}

func (h *handlers) create(c *gin.Context) error {
	var req noteRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		return err
	}
	if req.Title == nil {
		return apperr.Invalid("title", "is required")
	}
	body := ""
	if req.Body != nil {
		body = *req.Body
	}
	n, err := h.service.Create(c.Request.Context(), *req.Title, body)
	if err != nil {
		return err
	}
	c.Header("Location", httpapi.APIPrefix+"/notes/"+n.ID.String())
	writeNote(c, http.StatusCreated, n)
	return nil
}

func (h *handlers) get(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	n, err := h.service.Get(c.Request.Context(), id)
	if err != nil {
		return err
	}
	writeNote(c, http.StatusOK, n)
	return nil
}

func (h *handlers) edit(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	var req noteRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		return err
	}
	n, err := h.service.Edit(c.Request.Context(), id, Changes(req), httpapi.Precondition(c))
	if err != nil {
		return err
	}
	writeNote(c, http.StatusOK, n)
	return nil
}

// writeNote answers with the note and its version as a strong ETag.
func writeNote(c *gin.Context, status int, n *Note) {
	httpapi.SetETag(c, n.Version.String())
	c.JSON(status, noteResponse{
		ID: n.ID, ConversationID: n.ConversationID, Title: n.Title, Body: n.Body, WordCount: n.WordCount,
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, Version: n.Version.String(),
	})
}
