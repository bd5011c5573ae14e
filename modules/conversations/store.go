package conversations

import (
	"context"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/keelson/keelson/platform/database"
)

// store reads and writes conversations and messages in the unit of work carried by ctx.
type store struct{ db *database.DB }

// conversationCursor is the position after the last conversation of a page (newest first).
type conversationCursor struct {
	ID uuid.UUID `json:"id"`
}

// messageCursor is the position after the last message of a page (oldest first).
type messageCursor struct {
	CreatedAt time.Time `json:"created_at"`
	ID        uuid.UUID `json:"id"`
}

func (s *store) createConversation(ctx context.Context, c *Conversation) error {
	return s.db.Conn(ctx).Create(c).Error
}

func (s *store) conversation(ctx context.Context, id uuid.UUID) (*Conversation, error) {
	return database.Get[Conversation](ctx, s.db, "conversation", id)
}

// conversationForUpdate reads a conversation and locks its row until the unit of work ends, so
// writers that need no client precondition (a message post) queue instead of failing on the token.
func (s *store) conversationForUpdate(ctx context.Context, id uuid.UUID) (*Conversation, error) {
	return database.Get[Conversation](ctx, s.db, "conversation", id, func(q *gorm.DB) *gorm.DB {
		return q.Clauses(clause.Locking{Strength: "UPDATE"})
	})
}

// conversations lists newest first (ids are UUID v7, ordered by creation time).
func (s *store) conversations(ctx context.Context, after conversationCursor, limit int) ([]Conversation, error) {
	q := s.db.Conn(ctx).Order("id DESC").Limit(limit)
	if after.ID != uuid.Nil {
		q = q.Where("id < ?", after.ID)
	}
	var out []Conversation
	return out, q.Find(&out).Error
}

// updateConversation writes changes conditional on the token c was read with; c gets the new values.
func (s *store) updateConversation(ctx context.Context, c *Conversation, changes map[string]any) error {
	return s.db.Conn(ctx).Model(c).Updates(changes).Error
}

// saveConversation writes c conditional on the token it was read with.
func (s *store) saveConversation(ctx context.Context, c *Conversation) error {
	return s.db.Conn(ctx).Save(c).Error
}

// deleteConversation deletes c conditional on its token; messages go with it (ON DELETE CASCADE).
func (s *store) deleteConversation(ctx context.Context, c *Conversation) error {
	return s.db.Conn(ctx).Delete(c).Error
}

func (s *store) createMessage(ctx context.Context, m *Message) error {
	return s.db.Conn(ctx).Create(m).Error
}

// createReply inserts an assistant reply unless one already answers the same source message;
// false means it existed (a re-run job). ON CONFLICT keeps the transaction usable, unlike a caught 23505.
func (s *store) createReply(ctx context.Context, m *Message) (bool, error) {
	res := s.db.Conn(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "source_message_id"}},
		DoNothing: true,
	}).Create(m)
	return res.RowsAffected == 1, res.Error
}

func (s *store) message(ctx context.Context, id uuid.UUID) (*Message, error) {
	return database.Get[Message](ctx, s.db, "message", id)
}

func (s *store) replyExists(ctx context.Context, sourceID uuid.UUID) (bool, error) {
	var n int64
	err := s.db.Conn(ctx).Model(&Message{}).Where("source_message_id = ?", sourceID).Count(&n).Error
	return n > 0, err
}

// messages lists a conversation's messages oldest first.
func (s *store) messages(ctx context.Context, conversationID uuid.UUID, after messageCursor, limit int) ([]Message, error) {
	q := s.db.Conn(ctx).Where("conversation_id = ?", conversationID).Order("created_at, id").Limit(limit)
	if after.ID != uuid.Nil {
		q = q.Where("(created_at, id) > (?, ?)", after.CreatedAt, after.ID)
	}
	var out []Message
	return out, q.Find(&out).Error
}

// history returns up to n messages of the conversation up to and including last, oldest first.
func (s *store) history(ctx context.Context, last *Message, n int) ([]Message, error) {
	var out []Message
	err := s.db.Conn(ctx).Where("conversation_id = ? AND (created_at, id) <= (?, ?)", last.ConversationID, last.CreatedAt, last.ID).
		Order("created_at DESC, id DESC").Limit(n).Find(&out).Error
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}
