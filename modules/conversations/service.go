package conversations

import (
	"context"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/module"
)

// Service is the application layer of conversations: every write is one unit of work holding the
// row changes, the integration events and the enqueued jobs.
type Service struct {
	db     *database.DB
	store  *store
	events module.EventPublisher
	jobs   module.JobEnqueuer
}

func newService(db *database.DB, events module.EventPublisher, enqueuer module.JobEnqueuer) *Service {
	return &Service{db: db, store: &store{db: db}, events: events, jobs: enqueuer}
}

// Create starts a conversation.
func (s *Service) Create(ctx context.Context, title string) (*Conversation, error) {
	var v apperr.Validator
	title = checkTitle(&v, title)
	if err := v.Err(); err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	now := database.Now()
	c := &Conversation{ID: id, Title: title, CreatedAt: now, UpdatedAt: now}
	err = s.db.WithTx(ctx, func(ctx context.Context) error {
		if err := s.store.createConversation(ctx, c); err != nil {
			return err
		}
		return s.publish(ctx, contract.EventConversationCreated, contract.ConversationCreated{
			ConversationID: c.ID, Title: c.Title, CreatedAt: c.CreatedAt,
		})
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Get returns one conversation.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (*Conversation, error) {
	return s.store.conversation(ctx, id)
}

// List returns up to limit conversations, newest first, after the cursor's position.
func (s *Service) List(ctx context.Context, after conversationCursor, limit int) ([]Conversation, error) {
	return s.store.conversations(ctx, after, limit)
}

// Rename changes the title, if the conversation still has the version pre names (If-Match) and the
// token it was read with.
func (s *Service) Rename(ctx context.Context, id uuid.UUID, title string, pre concurrency.Precondition) (*Conversation, error) {
	var v apperr.Validator
	title = checkTitle(&v, title)
	if err := v.Err(); err != nil {
		return nil, err
	}
	return database.Update(ctx, s.db, s.change(id, pre, func(ctx context.Context, c *Conversation) error {
		if c.Title == title {
			return database.ErrNoChange // nothing changes, so neither does the version
		}
		previous := c.Title
		c.Title, c.UpdatedAt = title, nextUpdatedAt(c.UpdatedAt, database.Now())
		return s.publish(ctx, contract.EventConversationRenamed, contract.ConversationRenamed{
			ConversationID: c.ID, Title: c.Title, PreviousTitle: previous, UpdatedAt: c.UpdatedAt,
		})
	}, s.store.saveConversation))
}

// Delete removes a conversation and its messages, conditional on the version read and the token.
func (s *Service) Delete(ctx context.Context, id uuid.UUID, pre concurrency.Precondition) error {
	_, err := database.Update(ctx, s.db, s.change(id, pre,
		func(context.Context, *Conversation) error { return nil }, s.store.deleteConversation))
	return err
}

// change is the platform's update shape for one conversation.
func (s *Service) change(id uuid.UUID, pre concurrency.Precondition, apply, save func(context.Context, *Conversation) error) database.Change[Conversation] {
	return database.Change[Conversation]{
		Load:    func(ctx context.Context) (*Conversation, error) { return s.store.conversation(ctx, id) },
		Version: (*Conversation).Version,
		If:      pre,
		Apply:   apply,
		Save:    save,
	}
}

// PostMessage adds a user message and, in the same unit of work, touches the conversation under its
// token, publishes conversation.message.created and enqueues the assistant's reply job. The row is
// locked first: concurrent posts queue, while a PATCH holding an older version still loses (412/409).
func (s *Service) PostMessage(ctx context.Context, conversationID uuid.UUID, content string) (*Message, error) {
	var v apperr.Validator
	checkContent(&v, content)
	if err := v.Err(); err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	var m *Message
	err = s.db.WithTx(ctx, func(ctx context.Context) error {
		c, err := s.store.conversationForUpdate(ctx, conversationID)
		if err != nil {
			return err
		}
		now := nextUpdatedAt(c.UpdatedAt, database.Now())
		m = &Message{ID: id, ConversationID: c.ID, Role: RoleUser, Content: content, CreatedAt: now}
		if err := s.store.createMessage(ctx, m); err != nil {
			return err
		}
		if err := s.store.updateConversation(ctx, c, map[string]any{"updated_at": now}); err != nil {
			return err
		}
		if err := s.publish(ctx, contract.EventMessageCreated, messageCreated(m)); err != nil {
			return err
		}
		_, err = s.jobs.Enqueue(ctx, KindAssistantReply, replyJob{MessageID: m.ID},
			jobs.EnqueueOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Message returns one message of a conversation.
func (s *Service) Message(ctx context.Context, conversationID, id uuid.UUID) (*Message, error) {
	m, err := s.store.message(ctx, id)
	if err == nil && m.ConversationID != conversationID {
		return nil, apperr.NotFound("message", id.String())
	}
	return m, err
}

// Messages returns up to limit messages of a conversation, oldest first, after the cursor's
// position; 404 when the conversation does not exist.
func (s *Service) Messages(ctx context.Context, conversationID uuid.UUID, after messageCursor, limit int) ([]Message, error) {
	if _, err := s.store.conversation(ctx, conversationID); err != nil {
		return nil, err
	}
	return s.store.messages(ctx, conversationID, after, limit)
}

func (s *Service) publish(ctx context.Context, eventType string, payload any) error {
	return module.Publish(ctx, s.events, ModuleName, eventType, payload)
}

func messageCreated(m *Message) contract.MessageCreated {
	return contract.MessageCreated{
		ConversationID: m.ConversationID, MessageID: m.ID, Role: m.Role, Content: m.Content, CreatedAt: m.CreatedAt,
	}
}
