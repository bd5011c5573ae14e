package concurrency

import (
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

const addedSelectKey = "concurrency:added_select"

// selectVersion adds xmin to the implicit `SELECT *` of a versioned model: `*` never includes system columns.
// Explicit Select/Omit, joins (GORM lists every column itself, xmin included) and raw SQL are left alone.
func (p *plugin) selectVersion(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || stmt.SQL.Len() != 0 {
		return
	}
	m := p.models.of(stmt.Schema)
	if m.err != nil {
		_ = db.AddError(m.err)
		return
	}
	if m.version == nil || len(stmt.Selects) != 0 || len(stmt.Omits) != 0 || len(stmt.Joins) != 0 {
		return
	}
	if _, ok := stmt.Clauses["SELECT"]; ok {
		return
	}
	if from, ok := stmt.Clauses["FROM"].Expression.(clause.From); ok && len(from.Joins) != 0 {
		return
	}
	if elemType(stmt.ReflectValue) != stmt.Schema.ModelType {
		return // scanning into another shape: GORM picks the columns
	}
	stmt.AddClause(clause.Select{Distinct: stmt.Distinct, Columns: []clause.Column{
		{Name: "*", Raw: true},
		{Name: m.version.DBName},
	}})
	stmt.Settings.Store(instanceKey(stmt, addedSelectKey), true)
}

// rememberRead snapshots the token values of every loaded entity.
func (p *plugin) rememberRead(db *gorm.DB) {
	stmt := db.Statement
	if stmt.Schema == nil {
		return
	}
	if _, ok := stmt.Settings.LoadAndDelete(instanceKey(stmt, addedSelectKey)); ok {
		// Leave the statement as the caller built it, for chains that reuse it (e.g. Count after Find).
		delete(stmt.Clauses, "SELECT")
	}
	if db.Error != nil || db.RowsAffected == 0 {
		return
	}
	m := p.models.of(stmt.Schema)
	if len(m.tokens) == 0 || m.tokensIndex == nil {
		return
	}
	selected := selectedTokens(stmt, m)
	if len(selected) == 0 {
		return
	}
	eachEntity(stmt.ReflectValue, stmt.Schema.ModelType, func(rv reflect.Value) {
		values := copyValues(m.tokensOf(rv), len(m.tokens))
		for _, f := range selected {
			v, _ := f.ValueOf(stmt.Context, rv)
			values[f.DBName] = snapshotValue(v)
		}
		m.remember(rv, values)
	})
}

// selectedTokens are the tokens a query filled: all of them unless Select/Omit narrowed the columns.
func selectedTokens(stmt *gorm.Statement, m *model) []*schema.Field {
	if len(stmt.Selects) == 0 && len(stmt.Omits) == 0 {
		return m.tokens
	}
	columns, restricted := stmt.SelectAndOmitColumns(false, false)
	var out []*schema.Field
	for _, f := range m.tokens {
		if v, ok := columns[f.DBName]; (ok && v) || (!ok && !restricted) {
			out = append(out, f)
		}
	}
	return out
}
