package conversations

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/tenancy"
)

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// MaxContentLength is the longest message, in characters.
const MaxContentLength = 100_000

// Message is one turn of a conversation. An assistant message names the user message it answers
// in SourceMessageID, which is unique: a conversation never gets two replies to one message.
type Message struct {
	ID uuid.UUID `gorm:"primaryKey"`
	tenancy.Owned
	ConversationID  uuid.UUID
	Role            string
	Content         string
	SourceMessageID *uuid.UUID
	CreatedAt       time.Time
}

// TableName keeps messages beside their conversations.
func (Message) TableName() string { return "conversation_messages" }

// checkContent validates a user message's content: not blank, valid UTF-8 without NUL, bounded.
func checkContent(v *apperr.Validator, content string) {
	switch {
	case !utf8.ValidString(content) || strings.ContainsRune(content, 0):
		v.Check(false, "content", "must be valid UTF-8 text without NUL characters")
	case strings.TrimSpace(content) == "":
		v.Check(false, "content", "must not be empty")
	case utf8.RuneCountInString(content) > MaxContentLength:
		v.Check(false, "content", "must be at most 100000 characters")
	}
}

// cleanReply makes an assistant's text storable: valid UTF-8, no NUL, bounded, never empty.
func cleanReply(text string) string {
	text = strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", "")
	text = strings.TrimSpace(text)
	if utf8.RuneCountInString(text) > MaxContentLength {
		text = string([]rune(text)[:MaxContentLength])
	}
	if text == "" {
		text = "…"
	}
	return text
}

func trimSpace(s string) string { return strings.TrimSpace(s) }
