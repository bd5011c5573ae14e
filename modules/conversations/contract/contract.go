// Package contract is what other modules may know of the conversations module: its event types and payloads.
package contract

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Integration events published by the conversations module. The first three are public webhook event types.
const (
	EventConversationCreated = "conversation.created"
	EventConversationRenamed = "conversation.renamed"
	EventMessageCreated      = "conversation.message.created"
	// EventAssistantReplyCreated is internal: the proposals module turns its actions into proposals.
	EventAssistantReplyCreated = "assistant.reply_created"
)

// ConversationCreated is the payload of conversation.created.
type ConversationCreated struct {
	ConversationID uuid.UUID `json:"conversation_id"`
	Title          string    `json:"title"`
	CreatedAt      time.Time `json:"created_at"`
}

// ConversationRenamed is the payload of conversation.renamed.
type ConversationRenamed struct {
	ConversationID uuid.UUID `json:"conversation_id"`
	Title          string    `json:"title"`
	PreviousTitle  string    `json:"previous_title"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// MessageCreated is the payload of conversation.message.created, for user and assistant messages.
type MessageCreated struct {
	ConversationID uuid.UUID `json:"conversation_id"`
	MessageID      uuid.UUID `json:"message_id"`
	Role           string    `json:"role"`
	Content        string    `json:"content"`
	CreatedAt      time.Time `json:"created_at"`
}

// ProposedAction is one action of an assistant reply: a type and its params object.
type ProposedAction struct {
	Type   string          `json:"type"`
	Params json.RawMessage `json:"params"`
}

// AssistantReplyCreated is the payload of assistant.reply_created; proposals are idempotent on
// (SourceMessageID, index in Actions).
type AssistantReplyCreated struct {
	ConversationID  uuid.UUID        `json:"conversation_id"`
	MessageID       uuid.UUID        `json:"message_id"`
	SourceMessageID uuid.UUID        `json:"source_message_id"`
	Actions         []ProposedAction `json:"actions"`
	Rationale       string           `json:"rationale"`
}
