package proposals

import (
	"context"
	"encoding/json"
	"errors"

	cconv "github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/modules/proposals/contract"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/messaging"
)

// Consumers of this module.
const (
	ConsumerIntake  = "proposals.intake"
	ConsumerResults = "proposals.results"
)

// subscriptions turn assistant replies into proposals and action results into applied/failed.
// Both run under the inbox, in the same unit of work as their writes and events.
func (s *Service) subscriptions() []messaging.Subscription {
	return []messaging.Subscription{
		{Consumer: ConsumerIntake, EventTypes: []string{cconv.EventAssistantReplyCreated}, Handle: s.handleReply},
		{Consumer: ConsumerResults, EventTypes: []string{contract.EventActionResult}, Handle: s.handleResult},
	}
}

func (s *Service) handleReply(ctx context.Context, e messaging.Event) error {
	var reply cconv.AssistantReplyCreated
	if err := e.Decode(&reply); err != nil {
		return err
	}
	if len(reply.Actions) == 0 {
		return nil
	}
	return messaging.ProcessOnce(ctx, s.db, ConsumerIntake, e.ID, func(ctx context.Context) error {
		return s.intake(ctx, reply)
	})
}

func (s *Service) handleResult(ctx context.Context, e messaging.Event) error {
	var result contract.ActionResult
	if err := e.Decode(&result); err != nil {
		return err
	}
	return messaging.ProcessOnce(ctx, s.db, ConsumerResults, e.ID, func(ctx context.Context) error {
		err := s.recordResult(ctx, result)
		if errors.Is(err, apperr.ErrNotFound) {
			s.logger.WarnContext(ctx, "action result for an unknown proposal; ignored", "proposal_id", result.ProposalID)
			return nil
		}
		return err
	})
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}
