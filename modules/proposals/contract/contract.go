// Package contract is what other modules may know of the proposals module: the events it
// publishes and consumes, and the actions a proposal can carry.
package contract

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/module"
)

// Integration events published by the proposals module (public webhook event types).
const (
	EventProposalCreated  = "proposal.created"
	EventProposalAccepted = "proposal.accepted"
	EventProposalRejected = "proposal.rejected"
	EventProposalApplied  = "proposal.applied"
)

// EventActionResult is published by the module that applied an accepted proposal.
const EventActionResult = "assistant.action_result"

// Actions a proposal can carry; the module owning the data applies them.
const (
	ActionRenameConversation        = "rename_conversation"
	ActionCreateWebhookSubscription = "create_webhook_subscription"
)

// Action is one proposed change: its type and its parameters (a JSON object).
type Action struct {
	Type   string          `json:"type"`
	Params json.RawMessage `json:"params"`
}

// RenameConversationParams are the params of rename_conversation.
type RenameConversationParams struct {
	Title string `json:"title"`
}

// CreateWebhookSubscriptionParams are the params of create_webhook_subscription.
type CreateWebhookSubscriptionParams struct {
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
}

// Events are the module's public integration events: webhook subscribers receive them.
var Events = []module.EventType{
	{Type: EventProposalCreated, Description: "The assistant proposed an action; it waits for a user's decision.",
		Example: ProposalCreated{Proposal: example, Rationale: "The user asked for a shorter title.", CreatedAt: exampleTime}},
	{Type: EventProposalAccepted, Description: "A user accepted a proposal; the module owning the data applies it.",
		Example: ProposalAccepted{Proposal: example, DecidedAt: exampleTime}},
	{Type: EventProposalRejected, Description: "A user rejected a proposal.",
		Example: ProposalRejected{Proposal: example, Reason: "Keep the old title.", DecidedAt: exampleTime}},
	{Type: EventProposalApplied, Description: "An accepted proposal's action was carried out.",
		Example: ProposalApplied{Proposal: example, AppliedAt: exampleTime}},
}

var (
	example = Proposal{ProposalID: uuid.MustParse("0193a4d3-1f2e-7c3d-8a4b-5c6d7e8f9a01"),
		ConversationID: uuid.MustParse("0193a4d2-6b0d-7a39-8e1f-1a7b4c5d6e70"),
		Action:         Action{Type: ActionRenameConversation, Params: json.RawMessage(`{"title":"Lisbon"}`)}}
	exampleTime = time.Date(2026, 12, 1, 9, 31, 0, 0, time.UTC)
)

// Proposal is what every proposal.* payload says first: which proposal, in which conversation,
// proposing what.
type Proposal struct {
	ProposalID     uuid.UUID `json:"proposal_id" format:"uuid"`
	ConversationID uuid.UUID `json:"conversation_id" format:"uuid"`
	Action         Action    `json:"action"`
}

// ProposalCreated is the payload of proposal.created.
type ProposalCreated struct {
	Proposal
	Rationale string    `json:"rationale"`
	CreatedAt time.Time `json:"created_at"`
}

// ProposalAccepted is the payload of proposal.accepted: the owner of the data applies Action.
type ProposalAccepted struct {
	Proposal
	DecidedAt time.Time `json:"decided_at"`
}

// ProposalRejected is the payload of proposal.rejected.
type ProposalRejected struct {
	Proposal
	Reason    string    `json:"reason"`
	DecidedAt time.Time `json:"decided_at"`
}

// ProposalApplied is the payload of proposal.applied.
type ProposalApplied struct {
	Proposal
	AppliedAt time.Time `json:"applied_at"`
}

// ActionResult is the payload of assistant.action_result: Applied, or not with Error saying why.
type ActionResult struct {
	ProposalID uuid.UUID `json:"proposal_id" format:"uuid"`
	Applied    bool      `json:"applied"`
	Error      string    `json:"error,omitempty"`
}
