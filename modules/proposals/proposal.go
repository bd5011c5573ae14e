package proposals

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/proposals/contract"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/tenancy"
)

// Statuses of a proposal: pending → accepted → applied|failed, or pending → rejected.
const (
	StatusPending  = "pending"
	StatusAccepted = "accepted"
	StatusRejected = "rejected"
	StatusApplied  = "applied"
	StatusFailed   = "failed"
)

// MaxReasonLength bounds a rejection reason, in characters.
const MaxReasonLength = 1000

// Proposal is an action proposed by the assistant, waiting for the user's decision. Status is its
// concurrency token: a decision is written only if the status is still the one expected, so of two
// decisions the second finds none and fails with a ConflictError on entity "Proposal".
type Proposal struct {
	concurrency.Tokens
	ID uuid.UUID `gorm:"primaryKey"`
	tenancy.Owned
	ConversationID  uuid.UUID
	ReplyMessageID  uuid.UUID
	SourceMessageID uuid.UUID
	ActionIndex     int
	ActionType      string
	ActionParams    string `gorm:"type:jsonb"`
	Rationale       string
	Status          string `gorm:"concurrencyToken"`
	Reason          string
	Error           string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	DecidedAt       *time.Time
}

// Table is the proposals table, also the entity name conflicts on a proposal are reported under.
const Table = "proposals"

// TableName is the module's table.
func (Proposal) TableName() string { return Table }

// Version is the `version` and ETag of a proposal: its updated_at in microseconds.
func (p *Proposal) Version() string { return strconv.FormatInt(p.UpdatedAt.UnixMicro(), 10) }

// decide records the user's decision on a pending proposal; a proposal already decided is a
// conflict on "proposals" (409 proposal_already_decided), as is one decided concurrently.
func (p *Proposal) decide(status, reason string, now time.Time) error {
	if p.Status != StatusPending {
		return concurrency.NewConflict(Table, p.ID.String())
	}
	p.Status, p.Reason, p.DecidedAt, p.UpdatedAt = status, reason, &now, now
	return nil
}

// Action is the proposed action as the contract spells it.
func (p *Proposal) Action() contract.Action {
	return contract.Action{Type: p.ActionType, Params: json.RawMessage(p.ActionParams)}
}

// published is the proposal as every proposal.* event names it.
func (p *Proposal) published() contract.Proposal {
	return contract.Proposal{ProposalID: p.ID, ConversationID: p.ConversationID, Action: p.Action()}
}

var knownActions = map[string]bool{
	contract.ActionRenameConversation:        true,
	contract.ActionCreateWebhookSubscription: true,
}

// checkReason validates an optional rejection reason.
func checkReason(v *apperr.Validator, reason string) {
	switch {
	case !utf8.ValidString(reason) || strings.ContainsRune(reason, 0):
		v.Check(false, "reason", "must be valid UTF-8 text without NUL characters")
	case utf8.RuneCountInString(reason) > MaxReasonLength:
		v.Check(false, "reason", "must be at most 1000 characters")
	}
}
