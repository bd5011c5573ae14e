package notes

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
)

// Service holds the use cases. Each write is one unit of work: the row, the integration event
// and the enqueued job commit together or not at all.
type Service struct {
	db     *database.DB
	events module.EventPublisher
	jobs   module.JobEnqueuer
}

// Create stores a new note, publishes note.created and enqueues its word count.
func (s *Service) Create(ctx context.Context, title, body string) (*Note, error) {
	if err := validate(title, body); err != nil {
		return nil, err
	}
	n, err := newNote(strings.TrimSpace(title), body, nil)
	if err != nil {
		return nil, err
	}
	if err := s.db.WithTx(ctx, func(ctx context.Context) error { return s.create(ctx, n) }); err != nil {
		return nil, err
	}
	return n, nil
}

// create inserts n and runs afterWrite, inside the caller's unit of work.
func (s *Service) create(ctx context.Context, n *Note) error {
	if err := s.db.Conn(ctx).Create(n).Error; err != nil {
		return err
	}
	return s.afterWrite(ctx, n, EventNoteCreated)
}

// Get returns one note; an unknown id is apperr.NotFound (404).
func (s *Service) Get(ctx context.Context, id uuid.UUID) (*Note, error) {
	var n Note
	if err := s.db.Conn(ctx).First(&n, "id = ?", id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, apperr.NotFound("note", id.String())
		}
		return nil, err
	}
	return &n, nil
}

// Edit applies changes to the note as read in this unit of work, if it still has the version pre
// names (If-Match, else 412); Save compares xmin in the database (409 when another writer committed in between).
func (s *Service) Edit(ctx context.Context, id uuid.UUID, changes Changes, pre concurrency.Precondition) (*Note, error) {
	return database.Update(ctx, s.db, database.Change[Note]{
		Load:    func(ctx context.Context) (*Note, error) { return s.Get(ctx, id) },
		Version: func(n *Note) string { return n.Version.String() },
		If:      pre,
		Apply: func(ctx context.Context, n *Note) error {
			if err := n.apply(changes); err != nil {
				return err
			}
			n.UpdatedAt = database.Now()
			return s.afterWrite(ctx, n, EventNoteEdited)
		},
	})
}

// afterWrite publishes the integration event and enqueues the word count in the caller's unit of work.
func (s *Service) afterWrite(ctx context.Context, n *Note, eventType string) error {
	e, err := messaging.NewEvent(ctx, Name, eventType, NoteChanged{NoteID: n.ID, Title: n.Title})
	if err != nil {
		return err
	}
	if err := s.events.Publish(ctx, e); err != nil {
		return err
	}
	// One pending count per note is enough: the job reads the body when it runs.
	_, err = s.jobs.Enqueue(ctx, KindCountWords, countWordsJob{NoteID: n.ID},
		jobs.EnqueueOptions{DedupeKey: n.ID.String()})
	return err
}

// countWordsJob is the payload of notes.count_words.
type countWordsJob struct {
	NoteID uuid.UUID `json:"note_id"`
}

// countWords stores the note's word count. Save is xmin-guarded: if an edit commits while the job
// runs, Save returns a conflict, the attempt fails, and the retry counts the new body.
func (s *Service) countWords(ctx context.Context, job jobs.Job) error {
	var p countWordsJob
	if err := job.Decode(&p); err != nil {
		return err
	}
	return s.db.WithTx(ctx, func(ctx context.Context) error {
		n, err := s.Get(ctx, p.NoteID)
		if errors.Is(err, apperr.ErrNotFound) {
			return nil // deleted meanwhile: nothing to count
		}
		if err != nil {
			return err
		}
		count := wordCount(n.Body)
		if n.WordCount != nil && *n.WordCount == count {
			return nil
		}
		n.WordCount = &count
		return s.db.Conn(ctx).Save(n).Error
	})
}

// onConversationCreated opens a note for every new conversation. The inbox (ProcessOnce) makes a
// redelivered event a no-op; the UNIQUE conversation_id would refuse a second note anyway.
func (s *Service) onConversationCreated(ctx context.Context, e messaging.Event) error {
	var created contract.ConversationCreated
	if err := e.Decode(&created); err != nil {
		return err
	}
	return messaging.ProcessOnce(ctx, s.db, ConsumerNotes, e.ID, func(ctx context.Context) error {
		n, err := newNote(truncate("Notes on "+created.Title, 200), "", &created.ConversationID)
		if err != nil {
			return err
		}
		return s.create(ctx, n)
	})
}
