package conversations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/conversations/assistant"
	"github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/jobs"
)

// KindAssistantReply is the job that answers one user message.
const KindAssistantReply = "conversations.assistant_reply"

// replyJob is the payload of KindAssistantReply.
type replyJob struct {
	MessageID uuid.UUID `json:"message_id"`
}

// replier answers user messages through an Assistant, at most once per message.
type replier struct {
	service   *Service
	assistant assistant.Assistant
	history   int
}

// handle is the job handler. Calling the assistant happens outside any transaction; writing the
// reply is idempotent on the source message, so a re-run after a crash or a lost lease is a no-op.
func (r *replier) handle(ctx context.Context, job jobs.Job) error {
	var p replyJob
	if err := job.Decode(&p); err != nil {
		return err
	}
	s := r.service.store
	source, err := s.message(ctx, p.MessageID)
	if errors.Is(err, apperr.ErrNotFound) {
		return nil // the conversation was deleted with its messages: nothing to answer
	}
	if err != nil {
		return err
	}
	if source.Role != RoleUser {
		return nil
	}
	if done, err := s.replyExists(ctx, source.ID); err != nil || done {
		return err
	}
	conv, err := s.conversation(ctx, source.ConversationID)
	if errors.Is(err, apperr.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	history, err := s.history(ctx, source, r.history)
	if err != nil {
		return err
	}
	req := assistant.Request{ConversationID: conv.ID, ConversationTitle: conv.Title}
	for _, m := range history {
		req.History = append(req.History, assistant.Turn{Role: m.Role, Content: m.Content})
	}
	reply, err := r.assistant.Reply(ctx, req)
	if err != nil {
		return fmt.Errorf("assistant reply to message %s: %w", source.ID, err)
	}
	return r.service.saveReply(ctx, source, reply)
}

// saveReply writes the assistant message and publishes it with its proposed actions, once per source message.
func (s *Service) saveReply(ctx context.Context, source *Message, reply assistant.Reply) error {
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	return s.db.WithTx(ctx, func(ctx context.Context) error {
		m := &Message{
			ID: id, ConversationID: source.ConversationID, Role: RoleAssistant,
			Content: cleanReply(reply.Text), SourceMessageID: &source.ID, CreatedAt: database.Now(),
		}
		if !m.CreatedAt.After(source.CreatedAt) {
			m.CreatedAt = source.CreatedAt.Add(time.Microsecond) // keep the reply after its question in message order
		}
		inserted, err := s.store.createReply(ctx, m)
		if err != nil || !inserted {
			return err
		}
		if err := s.publish(ctx, contract.EventMessageCreated, messageCreated(m)); err != nil {
			return err
		}
		actions := make([]contract.ProposedAction, 0, len(reply.Actions))
		for _, a := range reply.Actions {
			actions = append(actions, contract.ProposedAction{Type: a.Type, Params: a.Params})
		}
		return s.publish(ctx, contract.EventAssistantReplyCreated, contract.AssistantReplyCreated{
			ConversationID: m.ConversationID, MessageID: m.ID, SourceMessageID: source.ID,
			Actions: actions, Rationale: reply.Rationale,
		})
	})
}
