package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	pcontract "github.com/keelson/keelson/modules/proposals/contract"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
)

// proposalsConsumer applies accepted create_webhook_subscription proposals.
const proposalsConsumer = "webhooks.proposals"

// registerProposals declares the consumer that applies accepted create_webhook_subscription
// proposals through svc.CreateSubscription and answers with assistant.action_result.
func (m *Module) registerProposals(r *module.Registry, svc *Service) error {
	r.Subscribe(messaging.Subscription{
		Consumer:   proposalsConsumer,
		EventTypes: []string{pcontract.EventProposalAccepted},
		Handle:     svc.applyAcceptedProposal,
	})
	return nil
}

// applyAcceptedProposal creates the proposed subscription and publishes the result in one unit of
// work guarded by the inbox, so a redelivered proposal.accepted creates nothing twice. Input the
// subscription rules refuse ends the proposal failed; an outage is retried by redelivery.
func (s *Service) applyAcceptedProposal(ctx context.Context, e messaging.Event) error {
	var accepted pcontract.ProposalAccepted
	if err := e.Decode(&accepted); err != nil {
		return err
	}
	if accepted.Action.Type != pcontract.ActionCreateWebhookSubscription {
		return nil // another module owns this action
	}
	return messaging.ProcessOnce(ctx, s.db, proposalsConsumer, e.ID, func(ctx context.Context) error {
		result := pcontract.ActionResult{ProposalID: accepted.ProposalID, Applied: true}
		var params pcontract.CreateWebhookSubscriptionParams
		if err := json.Unmarshal(accepted.Action.Params, &params); err != nil {
			result.Applied, result.Error = false, fmt.Sprintf("invalid %s params: %v", accepted.Action.Type, err)
		} else if _, _, err := s.CreateSubscription(ctx, SubscriptionInput{
			URL:         params.URL,
			EventTypes:  params.EventTypes,
			Description: "Created by the assistant (proposal " + accepted.ProposalID.String() + ")",
		}); err != nil {
			var invalid *apperr.ValidationError
			if !errors.As(err, &invalid) {
				return err
			}
			result.Applied, result.Error = false, err.Error()
		}
		if !result.Applied {
			s.log.WarnContext(ctx, "subscription proposal not applied", "proposal_id", accepted.ProposalID, "error", result.Error)
		}
		ev, err := messaging.NewEvent(ctx, Name, pcontract.EventActionResult, result)
		if err != nil {
			return err
		}
		return s.events.Publish(ctx, ev)
	})
}
