// Package assistant answers conversation messages: a deterministic built-in assistant by default,
// an OpenAI-compatible chat-completions adapter when configured. Replies may propose actions,
// which become proposals a user accepts or rejects.
package assistant

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"
)

// Roles of the turns in a history.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Turn is one message of the history.
type Turn struct {
	Role    string
	Content string
}

// Request is what the assistant answers: the conversation and its history, oldest first;
// the last turn is the user message to reply to.
type Request struct {
	ConversationID    uuid.UUID
	ConversationTitle string
	History           []Turn
}

// Action is one proposed change: a type (contract.ActionRenameConversation, …) and its params object.
type Action struct {
	Type   string
	Params json.RawMessage
}

// Reply is the assistant's answer: the text shown in the conversation, proposed actions and why.
type Reply struct {
	Text      string
	Actions   []Action
	Rationale string
}

// Assistant produces a reply. An error means "try again later": the reply job fails and is retried.
type Assistant interface {
	Reply(ctx context.Context, req Request) (Reply, error)
}
