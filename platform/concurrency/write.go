package concurrency

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/callbacks"
	"gorm.io/gorm/clause"
)

const guardKey = "concurrency:guard"

// guard is what guardUpdate/guardDelete hand to the check after the statement ran.
type guard struct {
	model    *model
	entity   reflect.Value
	key      string
	expected map[string]any // token values the WHERE required
	setAdded bool           // the SET clause was built here and must be removed like gorm:update does
	written  map[string]bool
}

// target decides whether the statement writes one stored entity: an addressable struct of the
// model's type with a non-zero primary key. Anything else (Model(&T{}).Where(...)) is a bulk statement.
func (p *plugin) target(db *gorm.DB) (*model, reflect.Value, string, bool) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || stmt.SQL.Len() != 0 {
		return nil, reflect.Value{}, "", false
	}
	m := p.models.of(stmt.Schema)
	if m.err != nil {
		_ = db.AddError(m.err)
		return nil, reflect.Value{}, "", false
	}
	if !m.guarded() {
		return nil, reflect.Value{}, "", false
	}
	rv := stmt.ReflectValue
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct || rv.Type() != stmt.Schema.ModelType {
		return nil, reflect.Value{}, "", false
	}
	k, ok := key(stmt.Context, stmt.Schema, rv)
	if !ok {
		return nil, reflect.Value{}, "", false
	}
	if !rv.CanAddr() {
		_ = db.AddError(fmt.Errorf("concurrency: pass a pointer to %s %s so its version can be checked and refreshed", stmt.Schema.Name, k))
		return nil, reflect.Value{}, "", false
	}
	if m.version != nil {
		if m.versionOf(stmt.Context, rv) == 0 {
			_ = db.AddError(fmt.Errorf("concurrency: %s %s has no row version: load it before writing it, or write by condition with Model(&%s{}).Where(...)",
				stmt.Schema.Name, k, stmt.Schema.Name))
			return nil, reflect.Value{}, "", false
		}
	}
	return m, rv, k, true
}

// conditions are the version and token checks of one entity; expected are the token values used.
func conditions(db *gorm.DB, m *model, rv reflect.Value) ([]clause.Expression, map[string]any) {
	stmt := db.Statement
	var exprs []clause.Expression
	if m.version != nil {
		// Bound as a parameter: `xmin = $1` is typed xid, a literal above 2^31 would be a bigint.
		exprs = append(exprs, clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: m.version.DBName}, Value: uint32(m.versionOf(stmt.Context, rv))})
	}
	expected := map[string]any{}
	if len(m.tokens) > 0 {
		loaded := m.tokensOf(rv)
		now := m.current(stmt.Context, rv)
		for _, f := range m.tokens {
			v, ok := loaded[f.DBName]
			if !ok {
				v = now[f.DBName] // never read through GORM: the caller's values are the expectation
			}
			expected[f.DBName] = v
			exprs = append(exprs, clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: v})
		}
	}
	return exprs, expected
}

// wrapWhere turns the caller's conditions into one group, so `Where(a).Or(b)` cannot swallow the checks.
func wrapWhere(stmt *gorm.Statement) {
	c, ok := stmt.Clauses["WHERE"]
	if !ok {
		return
	}
	where, ok := c.Expression.(clause.Where)
	if !ok || len(where.Exprs) < 2 && !isOr(where.Exprs) {
		return
	}
	c.Expression = clause.Where{Exprs: []clause.Expression{clause.AndConditions(where)}}
	stmt.Clauses["WHERE"] = c
}

func isOr(exprs []clause.Expression) bool {
	for _, e := range exprs {
		if _, ok := e.(clause.OrConditions); ok {
			return true
		}
	}
	return false
}

// guardUpdate adds `AND xmin = v AND token = original` and `RETURNING xmin` to the update of a stored entity.
func (p *plugin) guardUpdate(db *gorm.DB) {
	m, rv, k, ok := p.target(db)
	if !ok {
		return
	}
	stmt := db.Statement
	exprs, expected := conditions(db, m, rv) // before the SET is built: it overwrites updated_at in the struct
	wrapWhere(stmt)

	g := &guard{model: m, entity: rv, key: k, expected: expected, written: map[string]bool{}}
	if _, ok := stmt.Clauses["SET"]; !ok {
		set := callbacks.ConvertToAssignments(stmt)
		if len(set) == 0 || db.Error != nil {
			return // nothing to write: gorm:update skips the statement
		}
		stmt.AddClause(set)
		g.setAdded = true
	}
	set, _ := stmt.Clauses["SET"].Expression.(clause.Set)
	for _, a := range set {
		g.written[a.Column.Name] = true
	}
	stmt.AddClause(clause.Where{Exprs: exprs})

	var returning []clause.Column
	if m.version != nil {
		returning = append(returning, clause.Column{Name: m.version.DBName})
	}
	for _, f := range m.tokens {
		if g.written[f.DBName] {
			returning = append(returning, clause.Column{Name: f.DBName})
		}
	}
	addReturning(stmt, returning)
	stmt.Settings.Store(instanceKey(stmt, guardKey), g)
}

// addReturning merges columns into RETURNING; GORM's merge would collapse `RETURNING *` plus columns to `*`.
func addReturning(stmt *gorm.Statement, columns []clause.Column) {
	if len(columns) == 0 {
		return
	}
	c, ok := stmt.Clauses["RETURNING"]
	if !ok {
		stmt.AddClause(clause.Returning{Columns: columns})
		return
	}
	existing, _ := c.Expression.(clause.Returning)
	merged := existing.Columns
	if len(merged) == 0 {
		merged = []clause.Column{{Name: "*", Raw: true}}
	}
	for i, col := range merged {
		if col.Name == "*" {
			merged[i].Raw = true
		}
	}
	c.Expression = clause.Returning{Columns: append(append([]clause.Column(nil), merged...), columns...)}
	stmt.Clauses["RETURNING"] = c
}

// checkUpdate turns "matched no row" into a conflict inside the update chain, so Save does not
// fall back to its upsert and the default transaction rolls back; then it refreshes the originals.
func (p *plugin) checkUpdate(db *gorm.DB) {
	g := takeGuard(db)
	if g == nil {
		return
	}
	if g.setAdded {
		delete(db.Statement.Clauses, "SET")
	}
	if !conflictChecked(db, g) {
		return
	}
	if len(g.model.tokens) > 0 {
		values := copyValues(g.expected, len(g.model.tokens))
		for _, f := range g.model.tokens {
			if g.written[f.DBName] {
				v, _ := f.ValueOf(db.Statement.Context, g.entity)
				values[f.DBName] = snapshotValue(v)
			}
		}
		g.model.remember(g.entity, values)
	}
}

// guardDelete adds the checks to the delete (hard or soft) of a stored entity.
func (p *plugin) guardDelete(db *gorm.DB) {
	m, rv, k, ok := p.target(db)
	if !ok {
		return
	}
	exprs, expected := conditions(db, m, rv)
	wrapWhere(db.Statement)
	db.Statement.AddClause(clause.Where{Exprs: exprs})
	db.Statement.Settings.Store(instanceKey(db.Statement, guardKey), &guard{model: m, entity: rv, key: k, expected: expected})
}

func (p *plugin) checkDelete(db *gorm.DB) {
	if g := takeGuard(db); g != nil {
		conflictChecked(db, g)
	}
}

func takeGuard(db *gorm.DB) *guard {
	v, ok := db.Statement.Settings.LoadAndDelete(instanceKey(db.Statement, guardKey))
	if !ok {
		return nil
	}
	return v.(*guard)
}

// conflictChecked reports a conflict for 0 rows or SQLSTATE 40001; true means the write went through.
func conflictChecked(db *gorm.DB, g *guard) bool {
	stmt := db.Statement
	if db.Error != nil {
		var pgErr *pgconn.PgError
		if errors.As(db.Error, &pgErr) && pgErr.Code == "40001" {
			// Replaced, not added: AddError would only chain the text.
			db.Error = &ConflictError{entity: stmt.Schema.Name, table: stmt.Table, key: g.key, cause: pgErr}
		}
		return false
	}
	if db.DryRun || stmt.SQL.Len() == 0 {
		return false
	}
	if db.RowsAffected == 0 {
		_ = db.AddError(&ConflictError{entity: stmt.Schema.Name, table: stmt.Table, key: g.key})
		return false
	}
	return true
}
