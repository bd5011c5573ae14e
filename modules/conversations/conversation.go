package conversations

import (
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/conversations/assistant"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/tenancy"
)

// Conversation is a titled thread of messages. UpdatedAt is its concurrency token: every write is
// conditional on the value read, so a writer that lost a race gets a ConflictError.
type Conversation struct {
	concurrency.Tokens
	ID uuid.UUID `gorm:"primaryKey"`
	tenancy.Owned
	Title     string
	CreatedAt time.Time
	UpdatedAt time.Time `gorm:"concurrencyToken"`
}

// Version is the ETag and `version` of the conversation: its updated_at in microseconds.
func (c *Conversation) Version() string { return strconv.FormatInt(c.UpdatedAt.UnixMicro(), 10) }

// nextUpdatedAt is the token value of the next write: the clock, but always after the current value,
// so two writes within one microsecond still change the token.
func nextUpdatedAt(current, now time.Time) time.Time {
	if !now.After(current) {
		return current.Add(time.Microsecond)
	}
	return now
}

// checkTitle validates a title field (1–200 characters) and returns it without surrounding spaces.
func checkTitle(v *apperr.Validator, title string) string {
	if err := assistant.CheckTitle(title); err != nil {
		v.Check(false, "title", err.Error())
		return title
	}
	return trimSpace(title)
}
