// Package contract is what other modules may know of the conversations module: its event types and payloads.
package contract

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/module"
)

// Integration events published by the conversations module. The first three are public webhook event types.
const (
	EventConversationCreated = "conversation.created"
	EventConversationRenamed = "conversation.renamed"
	EventMessageCreated      = "conversation.message.created"
	// EventAssistantReplyCreated is internal: the proposals module turns its actions into proposals.
	EventAssistantReplyCreated = "assistant.reply_created"
)

// Events are the module's public integration events: webhook subscribers receive them.
var Events = []module.EventType{
	{Type: EventConversationCreated, Description: "A conversation was started.",
		Example: ConversationCreated{ConversationID: exampleConversation, Title: "Trip planning", CreatedAt: exampleTime}},
	{Type: EventConversationRenamed, Description: "A conversation's title changed.",
		Example: ConversationRenamed{ConversationID: exampleConversation, Title: "Trip to Lisbon", PreviousTitle: "Trip planning", UpdatedAt: exampleTime}},
	{Type: EventMessageCreated, Description: "A user or assistant message was added to a conversation.",
		Example: MessageCreated{ConversationID: exampleConversation, MessageID: uuid.MustParse("0193a4d2-7c1e-7b4a-9f0e-2b8c5d6e7f81"),
			Role: "user", Content: "Where should we stay?", CreatedAt: exampleTime}},
}

var (
	exampleConversation = uuid.MustParse("0193a4d2-6b0d-7a39-8e1f-1a7b4c5d6e70")
	exampleTime         = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
)

// ConversationCreated is the payload of conversation.created.
type ConversationCreated struct {
	ConversationID uuid.UUID `json:"conversation_id" format:"uuid"`
	Title          string    `json:"title"`
	CreatedAt      time.Time `json:"created_at"`
}

// ConversationRenamed is the payload of conversation.renamed.
type ConversationRenamed struct {
	ConversationID uuid.UUID `json:"conversation_id" format:"uuid"`
	Title          string    `json:"title"`
	PreviousTitle  string    `json:"previous_title"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// MessageCreated is the payload of conversation.message.created, for user and assistant messages.
type MessageCreated struct {
	ConversationID uuid.UUID `json:"conversation_id" format:"uuid"`
	MessageID      uuid.UUID `json:"message_id" format:"uuid"`
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
	ConversationID  uuid.UUID        `json:"conversation_id" format:"uuid"`
	MessageID       uuid.UUID        `json:"message_id" format:"uuid"`
	SourceMessageID uuid.UUID        `json:"source_message_id" format:"uuid"`
	Actions         []ProposedAction `json:"actions"`
	Rationale       string           `json:"rationale"`
}
