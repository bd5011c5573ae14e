package conversations

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

// TestCreateThenUpdateAtOnce writes a conversation and immediately updates the same struct, many
// times: the updated_at token held in memory matches the stored one to the microsecond.
func TestCreateThenUpdateAtOnce(t *testing.T) {
	db := dbtest.New(t, migrations.Sets(ModuleName)...)
	s := &store{db: db}
	ctx := tenantContext()
	for i := range 200 {
		now := database.Now()
		c := &Conversation{ID: uuid.Must(uuid.NewV7()), Title: "t", CreatedAt: now, UpdatedAt: now}
		require.NoError(t, s.createConversation(ctx, c))
		require.NoError(t, s.updateConversation(ctx, c, map[string]any{"title": "u", "updated_at": nextUpdatedAt(c.UpdatedAt, database.Now())}), "iteration %d", i)
		require.NoError(t, s.updateConversation(ctx, c, map[string]any{"title": "v", "updated_at": nextUpdatedAt(c.UpdatedAt, database.Now())}), "iteration %d", i)
		stored, err := s.conversation(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, "v", stored.Title)
		assert.True(t, stored.UpdatedAt.Equal(c.UpdatedAt), "memory and database agree on the token")
	}
}

// TestNanosecondClockStillMatches shows a struct created with a nanosecond timestamp still updates:
// the token is compared at the precision PostgreSQL stores.
func TestNanosecondClockStillMatches(t *testing.T) {
	db := dbtest.New(t, migrations.Sets(ModuleName)...)
	s := &store{db: db}
	ctx := tenantContext()
	now := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)
	c := &Conversation{ID: uuid.Must(uuid.NewV7()), Title: "t", CreatedAt: now, UpdatedAt: now}
	require.NoError(t, s.createConversation(ctx, c))
	require.NoError(t, s.updateConversation(ctx, c, map[string]any{"title": "u", "updated_at": nextUpdatedAt(c.UpdatedAt, database.Now())}))
}

// TestStaleCopyConflicts: two copies read the same version; the second write is a conflict naming the entity.
func TestStaleCopyConflicts(t *testing.T) {
	d := dbtest.Create(t, migrations.Sets(ModuleName)...)
	ours, theirs := &store{db: d.Open(t)}, &store{db: d.Open(t)}
	ctx := tenantContext()
	now := database.Now()
	c := &Conversation{ID: uuid.Must(uuid.NewV7()), Title: "t", CreatedAt: now, UpdatedAt: now}
	require.NoError(t, ours.createConversation(ctx, c))

	a, err := ours.conversation(ctx, c.ID)
	require.NoError(t, err)
	b, err := theirs.conversation(ctx, c.ID)
	require.NoError(t, err)
	require.NoError(t, theirs.updateConversation(ctx, b, map[string]any{"title": "theirs", "updated_at": nextUpdatedAt(b.UpdatedAt, database.Now())}))

	err = ours.updateConversation(ctx, a, map[string]any{"title": "ours", "updated_at": nextUpdatedAt(a.UpdatedAt, database.Now())})
	var conflict *concurrency.ConflictError
	require.True(t, errors.As(err, &conflict), "got %v", err)
	assert.Equal(t, "Conversation", conflict.EntityType())
	err = ours.deleteConversation(ctx, a)
	assert.ErrorIs(t, err, concurrency.ErrConflict, "a stale delete is a conflict too")

	stored, err := ours.conversation(ctx, c.ID)
	require.NoError(t, err)
	assert.Equal(t, "theirs", stored.Title)
}

func TestNextUpdatedAtAlwaysMoves(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 5000, time.UTC)
	assert.Equal(t, base.Add(time.Microsecond), nextUpdatedAt(base, base))
	assert.Equal(t, base.Add(time.Microsecond), nextUpdatedAt(base, base.Add(-time.Second)))
	assert.Equal(t, base.Add(time.Second), nextUpdatedAt(base, base.Add(time.Second)))
}
