package conversations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	pcontract "github.com/keelson/keelson/modules/proposals/contract"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/messaging"
)

// ConsumerProposals applies accepted proposals whose action this module owns.
const ConsumerProposals = "conversations.proposals"

// proposalApplier renames conversations for accepted rename_conversation proposals and answers
// with assistant.action_result, in one unit of work guarded by the inbox.
type proposalApplier struct {
	service *Service
	logger  *slog.Logger
}

func (a *proposalApplier) subscription() messaging.Subscription {
	return messaging.Subscription{
		Consumer:   ConsumerProposals,
		EventTypes: []string{pcontract.EventProposalAccepted},
		Handle:     a.handle,
	}
}

func (a *proposalApplier) handle(ctx context.Context, e messaging.Event) error {
	var accepted pcontract.ProposalAccepted
	if err := e.Decode(&accepted); err != nil {
		return err
	}
	if accepted.Action.Type != pcontract.ActionRenameConversation {
		return nil // another module owns this action
	}
	s := a.service
	return messaging.ProcessOnce(ctx, s.db, ConsumerProposals, e.ID, func(ctx context.Context) error {
		result := pcontract.ActionResult{ProposalID: accepted.ProposalID, Applied: true}
		var params pcontract.RenameConversationParams
		if err := decodeParams(accepted.Action, &params); err != nil {
			result.Applied, result.Error = false, err.Error()
		} else if _, err := s.Rename(ctx, accepted.ConversationID, params.Title, concurrency.Precondition{}); err != nil {
			var invalid *apperr.ValidationError
			if !errors.Is(err, apperr.ErrNotFound) && !errors.As(err, &invalid) {
				return err // a conflict or an outage: the event is redelivered and tried again
			}
			result.Applied, result.Error = false, err.Error()
		}
		if !result.Applied {
			a.logger.WarnContext(ctx, "rename proposal not applied", "proposal_id", accepted.ProposalID, "error", result.Error)
		}
		return s.publish(ctx, pcontract.EventActionResult, result)
	})
}

func decodeParams(action pcontract.Action, v any) error {
	if err := json.Unmarshal(action.Params, v); err != nil {
		return fmt.Errorf("invalid %s params: %w", action.Type, err)
	}
	return nil
}
