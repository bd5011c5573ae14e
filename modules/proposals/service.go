package proposals

import (
	"context"
	"log/slog"

	"github.com/google/uuid"

	cconv "github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/modules/proposals/contract"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/module"
)

// Service is the application layer of proposals: each change is one unit of work with its events.
type Service struct {
	db     *database.DB
	store  *store
	events module.EventPublisher
	logger *slog.Logger
}

func newService(db *database.DB, events module.EventPublisher, logger *slog.Logger) *Service {
	return &Service{db: db, store: &store{db: db}, events: events, logger: logger}
}

// Get returns one proposal.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (*Proposal, error) {
	return s.store.get(ctx, id)
}

// List returns up to limit proposals, newest first, after the cursor's position.
func (s *Service) List(ctx context.Context, f listFilter, after listCursor, limit int) ([]Proposal, error) {
	return s.store.list(ctx, f, after, limit)
}

// Accept decides a pending proposal and publishes proposal.accepted for the module owning the data.
// A proposal already decided (or decided concurrently) is a ConflictError → 409 proposal_already_decided.
func (s *Service) Accept(ctx context.Context, id uuid.UUID, pre concurrency.Precondition) (*Proposal, error) {
	return s.decide(ctx, id, StatusAccepted, "", pre)
}

// Reject decides a pending proposal with an optional reason and publishes proposal.rejected.
func (s *Service) Reject(ctx context.Context, id uuid.UUID, reason string, pre concurrency.Precondition) (*Proposal, error) {
	var v apperr.Validator
	checkReason(&v, reason)
	if err := v.Err(); err != nil {
		return nil, err
	}
	return s.decide(ctx, id, StatusRejected, reason, pre)
}

func (s *Service) decide(ctx context.Context, id uuid.UUID, status, reason string, pre concurrency.Precondition) (*Proposal, error) {
	return database.Update(ctx, s.db, database.Change[Proposal]{
		Load:    func(ctx context.Context) (*Proposal, error) { return s.store.get(ctx, id) },
		Version: (*Proposal).Version,
		If:      pre,
		Apply: func(ctx context.Context, p *Proposal) error {
			now := database.Now()
			if err := p.decide(status, reason, now); err != nil {
				return err
			}
			if status == StatusAccepted {
				return s.publish(ctx, contract.EventProposalAccepted, contract.ProposalAccepted{Proposal: p.published(), DecidedAt: now})
			}
			return s.publish(ctx, contract.EventProposalRejected, contract.ProposalRejected{Proposal: p.published(), Reason: reason, DecidedAt: now})
		},
		Save: s.store.save,
	})
}

// intake creates one pending proposal per action of an assistant reply; actions that already have
// a proposal (a redelivered event) are skipped, so each is proposed once.
func (s *Service) intake(ctx context.Context, reply cconv.AssistantReplyCreated) error {
	return s.db.WithTx(ctx, func(ctx context.Context) error {
		for i, a := range reply.Actions {
			if !knownActions[a.Type] || !isJSONObject(a.Params) {
				s.logger.WarnContext(ctx, "assistant proposed an unknown or malformed action; skipped",
					"action_type", a.Type, "source_message_id", reply.SourceMessageID)
				continue
			}
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			now := database.Now()
			p := &Proposal{
				ID: id, ConversationID: reply.ConversationID, ReplyMessageID: reply.MessageID,
				SourceMessageID: reply.SourceMessageID, ActionIndex: i, ActionType: a.Type,
				ActionParams: string(a.Params), Rationale: reply.Rationale, Status: StatusPending,
				CreatedAt: now, UpdatedAt: now,
			}
			created, err := s.store.createIfAbsent(ctx, p)
			if err != nil {
				return err
			}
			if !created {
				continue
			}
			if err := s.publish(ctx, contract.EventProposalCreated, contract.ProposalCreated{
				Proposal: p.published(), Rationale: p.Rationale, CreatedAt: p.CreatedAt,
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// recordResult ends an accepted proposal applied (publishing proposal.applied) or failed. A result
// for a proposal no longer accepted was already recorded: it changes nothing.
func (s *Service) recordResult(ctx context.Context, r contract.ActionResult) error {
	return s.db.WithTx(ctx, func(ctx context.Context) error {
		p, err := s.store.get(ctx, r.ProposalID)
		if err != nil {
			return err
		}
		if p.Status != StatusAccepted {
			return nil
		}
		now := database.Now()
		status, failure := StatusApplied, ""
		if !r.Applied {
			status, failure = StatusFailed, r.Error
			if failure == "" {
				failure = "not applied"
			}
		}
		if p, err = s.store.transition(ctx, p.ID, StatusAccepted, map[string]any{
			"status": status, "error": failure, "updated_at": now,
		}); err != nil {
			return err
		}
		if status != StatusApplied {
			return nil
		}
		return s.publish(ctx, contract.EventProposalApplied, contract.ProposalApplied{Proposal: p.published(), AppliedAt: now})
	})
}

func (s *Service) publish(ctx context.Context, eventType string, payload any) error {
	return module.Publish(ctx, s.events, ModuleName, eventType, payload)
}
