package proposals

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/concurrency"
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
	Reason string `json:"reason,omitempty"`
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

func (h *handlers) mount(api *httpapi.API) {
	g := api.Module("/assistant/proposals", "proposals").Scopes(auth.ConversationsRead, auth.ProposalsDecide)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "", ID: "listProposals",
		Summary: "List proposals, newest first."}, h.list)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/{id}", ID: "getProposal",
		Summary: "Get a proposal."}, h.get)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/{id}/accept", ID: "acceptProposal",
		Summary: "Accept a pending proposal; the module owning the data applies it."}, h.accept)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "/{id}/reject", ID: "rejectProposal",
		Summary: "Reject a pending proposal, with an optional reason."}, h.reject)
}

type listIn struct {
	Page           httpapi.Page
	Status         string    `query:"status" enum:"pending,accepted,rejected,applied,failed"`
	ConversationID uuid.UUID `query:"conversation_id"`
}

func (h *handlers) list(ctx context.Context, in *listIn) (*httpapi.ListOut[proposalResponse], error) {
	f := listFilter{Status: in.Status, ConversationID: in.ConversationID}
	return httpapi.PageOf(in.Page, func(after listCursor, limit int) ([]Proposal, error) {
		return h.service.List(ctx, f, after, limit)
	}, func(last Proposal) listCursor { return listCursor{ID: last.ID} }, toResponse)
}

type proposalOut = httpapi.Versioned[proposalResponse]

// answer answers a proposal with its version as ETag, or the error that kept it.
func answer(p *Proposal, err error) (*proposalOut, error) {
	if err != nil {
		return nil, err
	}
	return &proposalOut{ETag: p.Version(), Body: toResponse(p)}, nil
}

func (h *handlers) get(ctx context.Context, in *httpapi.ByID) (*proposalOut, error) {
	return answer(h.service.Get(ctx, in.ID))
}

type acceptIn struct {
	ID   uuid.UUID `path:"id"`
	If   concurrency.Precondition
	Body acceptRequest `required:"false"`
}

func (h *handlers) accept(ctx context.Context, in *acceptIn) (*proposalOut, error) {
	return answer(h.service.Accept(ctx, in.ID, in.If))
}

type rejectIn struct {
	ID   uuid.UUID `path:"id"`
	If   concurrency.Precondition
	Body rejectRequest `required:"false"`
}

func (h *handlers) reject(ctx context.Context, in *rejectIn) (*proposalOut, error) {
	return answer(h.service.Reject(ctx, in.ID, in.Body.Reason, in.If))
}
