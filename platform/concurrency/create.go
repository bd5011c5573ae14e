package concurrency

import (
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// refuseUpsert stops `ON CONFLICT DO UPDATE SET <all columns>` on guarded models: it overwrites the row
// whatever its version. It is what Save falls back to after an update matched nothing, and what Save(&slice) does.
func (p *plugin) refuseUpsert(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil {
		return
	}
	m := p.models.of(stmt.Schema)
	if m.err != nil {
		_ = db.AddError(m.err)
		return
	}
	if !m.guarded() {
		return
	}
	if oc, ok := stmt.Clauses["ON CONFLICT"].Expression.(clause.OnConflict); ok && oc.UpdateAll {
		_ = db.AddError(fmt.Errorf("concurrency: refusing an upsert of %s: it would overwrite concurrent changes; create new rows with Create and change loaded ones with Save one at a time", stmt.Schema.Name))
	}
}

// rememberCreated snapshots the token values just written, so the same struct can be updated next.
func (p *plugin) rememberCreated(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || db.RowsAffected == 0 {
		return
	}
	m := p.models.of(stmt.Schema)
	if len(m.tokens) == 0 || m.tokensIndex == nil {
		return
	}
	eachEntity(stmt.ReflectValue, stmt.Schema.ModelType, func(rv reflect.Value) {
		m.remember(rv, m.current(stmt.Context, rv))
	})
}
