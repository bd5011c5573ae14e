package database

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
)

// ErrNoChange, returned by Change.Apply, ends an update without a write: the version stays as it is.
var ErrNoChange = errors.New("database: nothing to change")

// Change is one update of a stored entity, the same shape in every module.
type Change[T any] struct {
	// Load reads the entity with its row version or concurrency tokens (apperr.NotFound when absent).
	Load func(ctx context.Context) (*T, error)
	// Version is the entity's current version, the one its ETag shows.
	Version func(*T) string
	// If is the client's precondition (If-Match), checked against Version before anything changes.
	If concurrency.Precondition
	// Apply is the domain change; it may publish events and enqueue jobs in the same unit of work.
	Apply func(ctx context.Context, entity *T) error
	// Save writes the entity under the concurrency plugin's check; nil saves it with GORM.
	Save func(ctx context.Context, entity *T) error
}

// Update runs load, check, change and save in one unit of work (joining the one in ctx, if any):
// a stale If-Match is apperr.ErrPreconditionFailed (412), a concurrent writer a *concurrency.ConflictError (409).
func Update[T any](ctx context.Context, db *DB, c Change[T]) (*T, error) {
	var out *T
	err := db.WithTx(ctx, func(ctx context.Context) error {
		entity, err := c.Load(ctx)
		if err != nil {
			return err
		}
		if err := c.If.Check(c.Version(entity)); err != nil {
			return err
		}
		out = entity
		if err := c.Apply(ctx, entity); err != nil {
			if errors.Is(err, ErrNoChange) {
				return nil
			}
			return err
		}
		if c.Save != nil {
			return c.Save(ctx, entity)
		}
		return db.Conn(ctx).Save(entity).Error
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get loads the row of T with primary key id in the unit of work in ctx, with its row version or
// tokens; none is apperr.NotFound(entity, id) (404). scopes narrow the query (a lock, a soft-delete filter).
func Get[T any](ctx context.Context, db *DB, entity string, id uuid.UUID, scopes ...func(*gorm.DB) *gorm.DB) (*T, error) {
	var row T
	err := db.Conn(ctx).Scopes(scopes...).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.NotFound(entity, id.String())
	}
	if err != nil {
		return nil, err
	}
	return &row, nil
}
