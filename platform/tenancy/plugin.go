package tenancy

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// Owned marks a model as tenant-scoped: embed it, and the plugin filters and stamps its tenant_id.
type Owned struct {
	TenantID uuid.UUID `gorm:"column:tenant_id;type:uuid;not null" json:"-"`
}

var ownedType = reflect.TypeOf(Owned{})

// Plugin installs the tenant callbacks: db.Use(tenancy.Plugin{}).
type Plugin struct{}

// Name identifies the plugin to GORM.
func (Plugin) Name() string { return "keelson:tenancy" }

// Initialize registers the callbacks, each just before the statement is built.
func (Plugin) Initialize(db *gorm.DB) error {
	p := &plugin{}
	cb := db.Callback()
	steps := []error{
		cb.Query().Before("gorm:query").Register("tenancy:filter_query", p.filter),
		cb.Row().Before("gorm:row").Register("tenancy:filter_row", p.filter),
		cb.Update().Before("gorm:update").Register("tenancy:filter_update", p.filterUpdate),
		cb.Delete().Before("gorm:delete").Register("tenancy:filter_delete", p.filter),
		cb.Create().Before("gorm:create").Register("tenancy:stamp_create", p.stamp),
	}
	for _, err := range steps {
		if err != nil {
			return err
		}
	}
	return nil
}

type plugin struct{ owned sync.Map } // *schema.Schema → *schema.Field (nil: not tenant-scoped)

// tenantField returns the tenant_id field of a scoped model, nil for any other model.
func (p *plugin) tenantField(s *schema.Schema) *schema.Field {
	if f, ok := p.owned.Load(s); ok {
		return f.(*schema.Field)
	}
	var f *schema.Field
	if embedsOwned(s.ModelType) {
		f = s.LookUpField("tenant_id")
	}
	p.owned.Store(s, f)
	return f
}

func embedsOwned(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type == ownedType {
			return true
		}
	}
	return false
}

// scope decides what a model-bound statement may see: its tenant, or every tenant in a system
// context. The statement fails with ErrNoTenant when ctx has neither.
func (p *plugin) scope(db *gorm.DB) (f *schema.Field, tenant uuid.UUID, filtered bool) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || stmt.SQL.Len() != 0 {
		return nil, uuid.Nil, false // raw SQL is not model-bound: its author scopes it
	}
	f = p.tenantField(stmt.Schema)
	if f == nil {
		return nil, uuid.Nil, false
	}
	if id, ok := From(stmt.Context); ok {
		return f, id, true
	}
	if _, ok := SystemReason(stmt.Context); ok {
		return f, uuid.Nil, false
	}
	_ = db.AddError(fmt.Errorf("%w: %s is tenant-scoped", ErrNoTenant, stmt.Schema.Table))
	return nil, uuid.Nil, false
}

// filter adds tenant_id = <tenant> to the statement, grouping the caller's conditions first so
// `Where(a).Or(b)` cannot escape it.
func (p *plugin) filter(db *gorm.DB) {
	f, tenant, ok := p.scope(db)
	if !ok {
		return
	}
	stmt := db.Statement
	cond := tenantCond{clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: tenant}}
	exprs := []clause.Expression{cond}
	c := stmt.Clauses["WHERE"]
	if where, ok := c.Expression.(clause.Where); ok && len(where.Exprs) > 0 {
		if _, again := where.Exprs[0].(tenantCond); again {
			// A chain run twice (Count, then Find) keeps its filter: replace it, never nest it.
			exprs = append(exprs, where.Exprs[1:]...)
		} else {
			exprs = append(exprs, clause.AndConditions(where))
		}
	}
	c.Name = "WHERE"
	c.Expression = clause.Where{Exprs: exprs}
	stmt.Clauses["WHERE"] = c
}

// tenantCond is the condition filter adds, recognisable when the statement runs again.
type tenantCond struct{ clause.Eq }

// filterUpdate filters like filter and keeps tenant_id out of the SET list: ownership never moves.
func (p *plugin) filterUpdate(db *gorm.DB) {
	p.filter(db)
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || stmt.SQL.Len() != 0 {
		return
	}
	f := p.tenantField(stmt.Schema)
	if f == nil {
		return
	}
	stmt.Omits = append(stmt.Omits, f.DBName)
	// Another callback (the concurrency guard) may have built the SET list already.
	if c, ok := stmt.Clauses["SET"]; ok {
		if set, ok := c.Expression.(clause.Set); ok {
			kept := make(clause.Set, 0, len(set))
			for _, a := range set {
				if a.Column.Name != f.DBName {
					kept = append(kept, a)
				}
			}
			c.Expression = kept
			stmt.Clauses["SET"] = c
		}
	}
}

// stamp sets tenant_id on every row a Create writes. In a system context the rows must name their
// tenant themselves; with a tenant in ctx a row naming another tenant is refused.
func (p *plugin) stamp(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || stmt.SQL.Len() != 0 {
		return
	}
	f := p.tenantField(stmt.Schema)
	if f == nil {
		return
	}
	tenant, scoped := From(stmt.Context)
	if _, system := SystemReason(stmt.Context); !scoped && !system {
		_ = db.AddError(fmt.Errorf("%w: %s is tenant-scoped", ErrNoTenant, stmt.Schema.Table))
		return
	}
	// Save falls back to an upsert on the statement its UPDATE ran with: tenant_id is written on
	// insert, and the DO UPDATE only ever touches a row of the same tenant.
	omits := stmt.Omits[:0:0]
	for _, o := range stmt.Omits {
		if o != f.DBName {
			omits = append(omits, o)
		}
	}
	stmt.Omits = omits
	if c, ok := stmt.Clauses["ON CONFLICT"]; ok && scoped {
		if oc, ok := c.Expression.(clause.OnConflict); ok && !oc.DoNothing {
			oc.Where.Exprs = append(oc.Where.Exprs, clause.Eq{Column: clause.Column{Table: stmt.Table, Name: f.DBName}, Value: tenant})
			c.Expression = oc
			stmt.Clauses["ON CONFLICT"] = c
		}
	}
	set := func(rv reflect.Value) {
		v, zero := f.ValueOf(stmt.Context, rv)
		switch {
		case !scoped && zero:
			_ = db.AddError(fmt.Errorf("%w: a system context creates %s rows only with their tenant_id set", ErrNoTenant, stmt.Schema.Table))
		case scoped && !zero && v.(uuid.UUID) != tenant:
			_ = db.AddError(fmt.Errorf("tenancy: a %s row of tenant %s created while acting for tenant %s", stmt.Schema.Table, v, tenant))
		case scoped && zero:
			if err := f.Set(stmt.Context, rv, tenant); err != nil {
				_ = db.AddError(err)
			}
		}
	}
	rv := reflect.Indirect(stmt.ReflectValue)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		for i := 0; i < rv.Len(); i++ {
			set(reflect.Indirect(rv.Index(i)))
		}
	case reflect.Struct:
		set(rv)
	case reflect.Map:
		m, ok := stmt.Dest.(map[string]any)
		if !ok {
			_ = db.AddError(fmt.Errorf("tenancy: create %s from a struct or map[string]any", stmt.Schema.Table))
			return
		}
		if _, named := m[f.DBName]; !named && scoped {
			m[f.DBName] = tenant
		} else if !named {
			_ = db.AddError(fmt.Errorf("%w: a system context creates %s rows only with their tenant_id set", ErrNoTenant, stmt.Schema.Table))
		}
	}
}
