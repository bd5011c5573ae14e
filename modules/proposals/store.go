package proposals

import (
	"context"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"

	"github.com/keelson/keelson/platform/database"
)

// store reads and writes proposals in the unit of work carried by ctx.
type store struct{ db *database.DB }

// listCursor is the position after the last proposal of a page (newest first).
type listCursor struct {
	ID uuid.UUID `json:"id"`
}

// listFilter narrows a list; zero fields match everything.
type listFilter struct {
	Status         string
	ConversationID uuid.UUID
}

// createIfAbsent inserts p unless its (source message, action index) already has a proposal.
func (s *store) createIfAbsent(ctx context.Context, p *Proposal) (bool, error) {
	res := s.db.Conn(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "source_message_id"}, {Name: "action_index"}},
		DoNothing: true,
	}).Create(p)
	return res.RowsAffected == 1, res.Error
}

func (s *store) get(ctx context.Context, id uuid.UUID) (*Proposal, error) {
	return database.Get[Proposal](ctx, s.db, "proposal", id)
}

func (s *store) list(ctx context.Context, f listFilter, after listCursor, limit int) ([]Proposal, error) {
	q := s.db.Conn(ctx).Order("id DESC").Limit(limit)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.ConversationID != uuid.Nil {
		q = q.Where("conversation_id = ?", f.ConversationID)
	}
	if after.ID != uuid.Nil {
		q = q.Where("id < ?", after.ID)
	}
	var out []Proposal
	return out, q.Find(&out).Error
}

// save writes a decided proposal conditional on the status it was read with.
func (s *store) save(ctx context.Context, p *Proposal) error {
	return s.db.Conn(ctx).Save(p).Error
}

// transition moves proposal id from the status expected to the changes' status, conditional on the
// status token, and returns it as written. The write states its expectation (not what was read), so
// a proposal read as already decided, or decided concurrently, matches no row and the plugin answers
// with a ConflictError on entity "Proposal".
func (s *store) transition(ctx context.Context, id uuid.UUID, expected string, changes map[string]any) (*Proposal, error) {
	expectation := &Proposal{ID: id, Status: expected}
	if err := s.db.Conn(ctx).Model(expectation).Updates(changes).Error; err != nil {
		return nil, err
	}
	return s.get(ctx, id)
}
