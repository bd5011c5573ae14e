package notes

import (
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/tenancy"
)

// Note is a titled text of one tenant. Version maps to PostgreSQL's xmin: every Save of a loaded note
// adds `AND xmin = <version read>`, so a write that lost a race gets a *concurrency.ConflictError.
// tenancy.Owned maps tenant_id: every statement on notes is scoped to the tenant of its context.
type Note struct {
	ID uuid.UUID `gorm:"type:uuid;primaryKey"`
	tenancy.Owned
	ConversationID *uuid.UUID `gorm:"type:uuid"`
	Title          string
	Body           string
	WordCount      *int // nil until the count job ran
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Version        concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

// NoteChanged is the payload of note.created and note.edited.
type NoteChanged struct {
	NoteID uuid.UUID `json:"note_id" format:"uuid"`
	Title  string    `json:"title"`
}

// Changes is a partial edit; nil fields stay as they are.
type Changes struct {
	Title *string
	Body  *string
}

// apply validates and applies an edit.
func (n *Note) apply(c Changes) error {
	title, body := n.Title, n.Body
	if c.Title != nil {
		title = *c.Title
	}
	if c.Body != nil {
		body = *c.Body
	}
	if err := validate(title, body); err != nil {
		return err
	}
	n.Title, n.Body = strings.TrimSpace(title), body
	return nil
}

func validate(title, body string) error {
	var v apperr.Validator
	title = strings.TrimSpace(title)
	v.Check(title != "", "title", "must not be empty")
	v.Check(len([]rune(title)) <= 200, "title", "must be at most 200 characters")
	v.Check(len(body) <= 64<<10, "body", "must be at most 64 KiB")
	return v.Err()
}

// newNote builds a note with a fresh UUID v7; conversationID links it to a conversation, or is nil.
func newNote(title, body string, conversationID *uuid.UUID) (*Note, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	now := database.Now()
	return &Note{ID: id, ConversationID: conversationID, Title: title, Body: body, CreatedAt: now, UpdatedAt: now}, nil
}

// truncate cuts s to at most n characters.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// wordCount is what the count job computes.
func wordCount(body string) int { return len(strings.Fields(body)) }
