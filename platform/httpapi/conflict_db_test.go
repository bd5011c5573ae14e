package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/httpapi"
)

// Proposal and Note are versioned by xmin; only Proposal has its own conflict code.
type Proposal struct {
	ID      int64 `gorm:"primaryKey"`
	Status  string
	Version concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

type Note struct {
	ID      int64 `gorm:"primaryKey"`
	Status  string
	Version concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

// decide loads a row, lets another replica change it (the race a handler loses), then saves:
// the real plugin's conflict must come out as 409 with the entity's code.
func decide[T any](ours, theirs *database.DB, status func(*T) *string) gin.HandlerFunc {
	return httpapi.H(func(c *gin.Context) error {
		id := c.Param("id")
		return ours.WithTx(c.Request.Context(), func(ctx context.Context) error {
			var row T
			if err := ours.Conn(ctx).First(&row, id).Error; err != nil {
				return err
			}
			if c.Query("race") == "lost" {
				var other T
				if err := theirs.Conn(c.Request.Context()).First(&other, id).Error; err != nil {
					return err
				}
				*status(&other) = "rejected"
				if err := theirs.Conn(c.Request.Context()).Save(&other).Error; err != nil {
					return err
				}
			}
			*status(&row) = "accepted"
			if err := ours.Conn(ctx).Save(&row).Error; err != nil {
				return err
			}
			c.Status(http.StatusNoContent)
			return nil
		})
	})
}

func TestRealConcurrencyConflictsBecome409(t *testing.T) {
	d := dbtest.Create(t)
	ours, theirs := d.Open(t), d.Open(t)
	_, err := ours.SQL().ExecContext(t.Context(), `
		CREATE TABLE proposals (id bigserial PRIMARY KEY, status text NOT NULL);
		CREATE TABLE notes (id bigserial PRIMARY KEY, status text NOT NULL);
		INSERT INTO proposals (status) VALUES ('pending'), ('pending');
		INSERT INTO notes (status) VALUES ('pending');`)
	require.NoError(t, err)

	srv := newServerWithRoutes(t, func(api *gin.RouterGroup) {
		api.POST("/proposals/:id/accept", decide(ours, theirs, func(p *Proposal) *string { return &p.Status }))
		api.POST("/notes/:id/accept", decide(ours, theirs, func(n *Note) *string { return &n.Status }))
	})

	tests := []struct {
		name       string
		url        string
		wantStatus int
		wantCode   string
		wantStored string
		table      string
	}{
		{"proposal decided once", "/api/v1/proposals/1/accept", 204, "", "accepted", "proposals"},
		{"proposal race lost", "/api/v1/proposals/2/accept?race=lost", 409, "proposal_already_decided", "rejected", "proposals"},
		{"note race lost", "/api/v1/notes/1/accept?race=lost", 409, "concurrency_conflict", "rejected", "notes"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := srv.do(t, "POST", tc.url, token, nil, nil)
			require.Equal(t, tc.wantStatus, res.status, string(res.body))
			assert.Equal(t, tc.wantCode, res.problem.Code)
			var stored string
			id := []int{1, 2, 1}[i]
			require.NoError(t, ours.SQL().QueryRowContext(t.Context(),
				"SELECT status FROM "+tc.table+" WHERE id = $1", id).Scan(&stored))
			assert.Equal(t, tc.wantStored, stored, "the loser's write was rolled back")
		})
	}
}
