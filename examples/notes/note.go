package notes

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/tenancy"
)

// Note is a titled text of one tenant, and its own JSON: tenant_id stays out of it. Version maps to
// PostgreSQL's xmin: every Save of a loaded note adds `AND xmin = <version read>`, so a write that lost
// a race gets a *concurrency.ConflictError. tenancy.Owned scopes every statement on notes to the
// tenant of its context.
type Note struct {
	ID uuid.UUID `gorm:"type:uuid;primaryKey" json:"id"`
	tenancy.Owned
	Title     string                 `json:"title"`
	Body      string                 `json:"body"`
	WordCount *int                   `json:"word_count"` // null until the count job ran
	CreatedAt time.Time              `json:"created_at"`
	UpdatedAt time.Time              `json:"updated_at"`
	Version   concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)" json:"version"`
}

// Changes is the body of POST and PATCH; a field left out stays as it is.
type Changes struct {
	Title *string `json:"title,omitempty"`
	Body  *string `json:"body,omitempty"`
}

// apply makes the changes and checks the note's rules: a title of 1 to 200 characters, a body of at most 64 KiB.
func (n *Note) apply(c Changes) error {
	if c.Title != nil {
		n.Title = strings.TrimSpace(*c.Title)
	}
	if c.Body != nil {
		n.Body = *c.Body
	}
	n.UpdatedAt = database.Now()
	var v apperr.Validator
	v.Check(n.Title != "", "title", "must not be empty")
	v.Check(utf8.RuneCountInString(n.Title) <= 200, "title", "must be at most 200 characters")
	v.Check(len(n.Body) <= 64<<10, "body", "must be at most 64 KiB")
	return v.Err()
}
