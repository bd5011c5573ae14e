package proposals

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/httpapi"
)

type actionResponse struct {
	Type   string          `json:"type"`
	Params json.RawMessage `json:"params"`
}

type proposalResponse struct {
	ID             uuid.UUID      `json:"id"`
	ConversationID uuid.UUID      `json:"conversation_id"`
	Action         actionResponse `json:"action"`
	Rationale      string         `json:"rationale"`
	Status         string         `json:"status"`
	Reason         string         `json:"reason,omitempty"`
	Error          string         `json:"error,omitempty"`
	CreatedAt      time.Time      `json:"created_at"`
	DecidedAt      *time.Time     `json:"decided_at"`
	Version        string         `json:"version"`
}

type acceptRequest struct{}

type rejectRequest struct {
	Reason string `json:"reason"`
}

func toResponse(p *Proposal) proposalResponse {
	var decidedAt *time.Time
	if p.DecidedAt != nil {
		utc := p.DecidedAt.UTC()
		decidedAt = &utc
	}
	return proposalResponse{
		ID: p.ID, ConversationID: p.ConversationID,
		Action:    actionResponse{Type: p.ActionType, Params: json.RawMessage(p.ActionParams)},
		Rationale: p.Rationale, Status: p.Status, Reason: p.Reason, Error: p.Error,
		CreatedAt: p.CreatedAt.UTC(), DecidedAt: decidedAt, Version: p.Version(),
	}
}

// handlers are the HTTP edge of the Service.
type handlers struct{ service *Service }

func (h *handlers) mount(api *gin.RouterGroup) {
	g := api.Group("/assistant/proposals")
	g.GET("", httpapi.H(h.list))
	g.GET("/:id", httpapi.H(h.get))
	g.POST("/:id/accept", httpapi.H(h.accept))
	g.POST("/:id/reject", httpapi.H(h.reject))
}

func (h *handlers) list(c *gin.Context) error {
	page, err := httpapi.ParsePage(c)
	if err != nil {
		return err
	}
	var f listFilter
	// An empty filter (?status=) means no filter, as in the API's own `?status=&conversation_id=`.
	if raw := c.Query("status"); raw != "" {
		if !knownStatuses[raw] {
			return httpapi.InvalidQuery("status", "must be one of pending, accepted, rejected, applied, failed")
		}
		f.Status = raw
	}
	if f.ConversationID, err = httpapi.QueryUUID(c, "conversation_id"); err != nil {
		return err
	}
	items, next, err := httpapi.Paginate(page, func(after listCursor, limit int) ([]Proposal, error) {
		return h.service.List(c.Request.Context(), f, after, limit)
	}, func(last Proposal) listCursor { return listCursor{ID: last.ID} })
	if err != nil {
		return err
	}
	out := make([]proposalResponse, len(items))
	for i := range items {
		out[i] = toResponse(&items[i])
	}
	c.JSON(http.StatusOK, httpapi.NewList(out, next))
	return nil
}

func (h *handlers) get(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	p, err := h.service.Get(c.Request.Context(), id)
	if err != nil {
		return err
	}
	if httpapi.NotModified(c, p.Version()) {
		return nil
	}
	write(c, p)
	return nil
}

func (h *handlers) accept(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	if err := httpapi.BindJSON(c, &acceptRequest{}, httpapi.AllowEmpty); err != nil {
		return err
	}
	p, err := h.service.Accept(c.Request.Context(), id, httpapi.Precondition(c))
	if err != nil {
		return err
	}
	write(c, p)
	return nil
}

func (h *handlers) reject(c *gin.Context) error {
	id, err := httpapi.PathUUID(c, "id")
	if err != nil {
		return err
	}
	var req rejectRequest
	if err := httpapi.BindJSON(c, &req, httpapi.AllowEmpty); err != nil {
		return err
	}
	p, err := h.service.Reject(c.Request.Context(), id, req.Reason, httpapi.Precondition(c))
	if err != nil {
		return err
	}
	write(c, p)
	return nil
}

func write(c *gin.Context, p *Proposal) {
	httpapi.SetETag(c, p.Version())
	c.JSON(http.StatusOK, toResponse(p))
}
