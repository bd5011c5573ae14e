package notes

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

// noteRequest is the body of POST and PATCH; pointers tell "absent" from "empty".
type noteRequest struct {
	Title *string `json:"title,omitempty"`
	Body  *string `json:"body,omitempty"`
}

type noteResponse struct {
	ID             uuid.UUID  `json:"id"`
	ConversationID *uuid.UUID `json:"conversation_id" nullable:"true"`
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

func (h *handlers) mount(api *httpapi.API) {
	g := api.Module("/notes", "notes").Scopes(auth.ConversationsRead, auth.ConversationsWrite)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, Path: "", ID: "createNote",
		Summary: "Write a note.", Status: http.StatusCreated}, h.create)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/{id}", ID: "getNote",
		Summary: "Read a note."}, h.get)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPatch, Path: "/{id}", ID: "editNote",
		Summary: "Edit a note's title or body."}, h.edit)
}

type createIn struct {
	Body noteRequest
}

type createdOut struct {
	ETag     string `header:"ETag"`
	Location string `header:"Location"`
	Body     noteResponse
}

func (h *handlers) create(ctx context.Context, in *createIn) (*createdOut, error) {
	if in.Body.Title == nil {
		return nil, apperr.Invalid("title", "is required")
	}
	n, err := h.service.Create(ctx, *in.Body.Title, derefOr(in.Body.Body, ""))
	if err != nil {
		return nil, err
	}
	return &createdOut{ETag: n.Version.String(), Location: httpapi.APIPrefix + "/notes/" + n.ID.String(), Body: toResponse(n)}, nil
}

type getIn struct {
	ID uuid.UUID `path:"id"`
}

// noteOut is a note with its version as a strong ETag.
type noteOut struct {
	ETag string `header:"ETag"`
	Body noteResponse
}

func (h *handlers) get(ctx context.Context, in *getIn) (*noteOut, error) {
	n, err := h.service.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return &noteOut{ETag: n.Version.String(), Body: toResponse(n)}, nil
}

type editIn struct {
	ID   uuid.UUID                `path:"id"`
	If   concurrency.Precondition // If-Match
	Body noteRequest
}

func (h *handlers) edit(ctx context.Context, in *editIn) (*noteOut, error) {
	n, err := h.service.Edit(ctx, in.ID, Changes(in.Body), in.If)
	if err != nil {
		return nil, err
	}
	return &noteOut{ETag: n.Version.String(), Body: toResponse(n)}, nil
}

func toResponse(n *Note) noteResponse {
	return noteResponse{
		ID: n.ID, ConversationID: n.ConversationID, Title: n.Title, Body: n.Body, WordCount: n.WordCount,
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, Version: n.Version.String(),
	}
}

func derefOr(s *string, fallback string) string {
	if s == nil {
		return fallback
	}
	return *s
}
