package notes

import (
	"context"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/module"
)

// Service answers the routes and runs the job. Each write is one unit of work: the row, the
// integration event and the enqueued job commit together or not at all. Errors are not mapped here:
// httpapi.Handle turns them into problem+json (apperr.NotFound 404, a validation error 422, ...).
type Service struct {
	db     *database.DB
	events module.EventPublisher
	jobs   module.JobEnqueuer
}

// mount declares the routes; the served /openapi.json describes them from the same declarations.
func (s *Service) mount(api *httpapi.API) {
	g := api.Module("/notes", "notes").Scopes(auth.ConversationsRead, auth.ConversationsWrite)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPost, ID: "createNote", Summary: "Write a note.",
		Status: http.StatusCreated}, s.create)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, ID: "listNotes", Summary: "List notes, oldest first."}, s.list)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodGet, Path: "/{id}", ID: "getNote", Summary: "Read a note."}, s.get)
	httpapi.Handle(g, httpapi.Route{Method: http.MethodPatch, Path: "/{id}", ID: "editNote",
		Summary: "Edit a note's title or body."}, s.edit)
}

type createIn struct{ Body Changes }

// create stores a new note, publishes note.created and enqueues its word count.
func (s *Service) create(ctx context.Context, in *createIn) (*httpapi.Created[Note], error) {
	n := &Note{ID: uuid.Must(uuid.NewV7())} // crypto/rand does not fail
	if err := n.apply(in.Body); err != nil {
		return nil, err
	}
	n.CreatedAt = n.UpdatedAt
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		if err := s.db.Conn(ctx).Create(n).Error; err != nil {
			return err
		}
		if err := module.Publish(ctx, s.events, Name, EventNoteCreated, NoteCreated{NoteID: n.ID, Title: n.Title}); err != nil {
			return err
		}
		return s.countLater(ctx, n.ID)
	})
	if err != nil {
		return nil, err
	}
	return &httpapi.Created[Note]{ETag: n.Version.String(), Location: httpapi.APIPrefix + "/notes/" + n.ID.String(), Body: *n}, nil
}

type listIn struct{ Page httpapi.Page }

// list pages through the notes oldest first (UUID v7 ids sort by time), the last id as cursor.
func (s *Service) list(ctx context.Context, in *listIn) (*httpapi.ListOut[Note], error) {
	return httpapi.PageOf(in.Page, func(after uuid.UUID, limit int) ([]Note, error) {
		var notes []Note
		return notes, s.db.Conn(ctx).Where("id > ?", after).Order("id").Limit(limit).Find(&notes).Error
	}, func(last Note) uuid.UUID { return last.ID }, func(n *Note) Note { return *n })
}

func (s *Service) get(ctx context.Context, in *httpapi.ByID) (*httpapi.Versioned[Note], error) {
	return versioned(database.Get[Note](ctx, s.db, "note", in.ID))
}

type editIn struct {
	ID   uuid.UUID                `path:"id"`
	If   concurrency.Precondition // If-Match
	Body Changes
}

// edit is the platform's one update shape: load the note, check the client's If-Match (412), change
// it, save it under the xmin check (409 when another writer committed in between).
func (s *Service) edit(ctx context.Context, in *editIn) (*httpapi.Versioned[Note], error) {
	return versioned(database.Update(ctx, s.db, database.Change[Note]{
		Load:    func(ctx context.Context) (*Note, error) { return database.Get[Note](ctx, s.db, "note", in.ID) },
		Version: func(n *Note) string { return n.Version.String() },
		If:      in.If,
		Apply: func(ctx context.Context, n *Note) error {
			if err := n.apply(in.Body); err != nil {
				return err
			}
			return s.countLater(ctx, n.ID)
		},
	}))
}

// versioned answers a note with its version as ETag, or the error that kept it.
func versioned(n *Note, err error) (*httpapi.Versioned[Note], error) {
	if err != nil {
		return nil, err
	}
	return &httpapi.Versioned[Note]{ETag: n.Version.String(), Body: *n}, nil
}

type countWordsJob struct {
	NoteID uuid.UUID `json:"note_id"`
}

// countLater enqueues the word count in the caller's unit of work; while one is pending, another is a
// no-op: the job reads the body when it runs.
func (s *Service) countLater(ctx context.Context, id uuid.UUID) error {
	_, err := s.jobs.Enqueue(ctx, KindCountWords, countWordsJob{NoteID: id}, jobs.EnqueueOptions{DedupeKey: id.String()})
	return err
}

// countWords stores the note's word count. The write is xmin-guarded: an edit committed since the
// read makes it a conflict, the attempt fails, and the retry counts the new body.
func (s *Service) countWords(ctx context.Context, job jobs.Job) error {
	var p countWordsJob
	if err := job.Decode(&p); err != nil {
		return err
	}
	n, err := database.Get[Note](ctx, s.db, "note", p.NoteID)
	if err != nil {
		return err
	}
	return s.db.Conn(ctx).Model(n).UpdateColumn("word_count", len(strings.Fields(n.Body))).Error
}
