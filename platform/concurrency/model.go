package concurrency

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"gorm.io/gorm/schema"
)

// tokenTag is the gorm tag key that marks a column as a concurrency token (ParseTagSetting upper-cases keys).
const tokenTag = "CONCURRENCYTOKEN"

var (
	rowVersionType = reflect.TypeOf(RowVersion(0))
	tokensType     = reflect.TypeOf(Tokens{})
)

// model is what the plugin knows about one GORM schema.
type model struct {
	version     *schema.Field   // the RowVersion field, nil when the model has none
	tokens      []*schema.Field // fields tagged concurrencyToken
	tokensIndex []int           // path to the embedded Tokens, nil when not embedded
	err         error           // a mapping mistake reported on every statement of the model
}

func (m *model) guarded() bool { return m.version != nil || len(m.tokens) > 0 }

// models caches one *model per schema; schemas are themselves cached per type by GORM, so it stays small.
type models struct{ byschema sync.Map }

func (c *models) of(s *schema.Schema) *model {
	if s == nil {
		return nil
	}
	if m, ok := c.byschema.Load(s); ok {
		return m.(*model)
	}
	m, _ := c.byschema.LoadOrStore(s, inspect(s))
	return m.(*model)
}

func inspect(s *schema.Schema) *model {
	m := &model{}
	for _, f := range s.Fields {
		if f.DBName == "" {
			continue
		}
		if f.IndirectFieldType == rowVersionType {
			if m.version != nil {
				m.err = fmt.Errorf("concurrency: %s has more than one RowVersion field", s.Name)
			}
			m.version = f
			if f.DBName != "xmin" || f.Creatable || f.Updatable {
				m.err = fmt.Errorf("concurrency: %s.%s must map the system column xmin read-only: tag it `gorm:\"column:xmin;->;-:migration;default:(-)\"`", s.Name, f.Name)
			}
			continue
		}
		if _, ok := f.TagSettings[tokenTag]; ok {
			m.tokens = append(m.tokens, f)
		}
	}
	m.tokensIndex = findTokens(s.ModelType, nil)
	if len(m.tokens) > 0 && m.tokensIndex == nil && m.err == nil {
		m.err = fmt.Errorf("concurrency: %s has concurrencyToken fields and must embed concurrency.Tokens to remember their values as read", s.Name)
	}
	return m
}

// findTokens returns the index path of an embedded Tokens value, searching embedded structs too.
func findTokens(t reflect.Type, prefix []int) []int {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.Anonymous {
			continue
		}
		path := append(append([]int(nil), prefix...), i)
		if f.Type == tokensType {
			return path
		}
		if f.Type.Kind() == reflect.Struct && f.IsExported() {
			if p := findTokens(f.Type, path); p != nil {
				return p
			}
		}
	}
	return nil
}

// tokensOf reads the remembered originals of the entity rv (a struct of the model's type).
func (m *model) tokensOf(rv reflect.Value) map[string]any {
	if m.tokensIndex == nil {
		return nil
	}
	return rv.FieldByIndex(m.tokensIndex).Interface().(Tokens).loaded
}

// remember replaces the originals of an addressable entity.
func (m *model) remember(rv reflect.Value, values map[string]any) {
	if m.tokensIndex == nil || !rv.CanAddr() {
		return
	}
	rv.FieldByIndex(m.tokensIndex).Addr().Interface().(*Tokens).loaded = values
}

// versionOf reads the row version the entity holds (0 when it has none).
func (m *model) versionOf(ctx context.Context, rv reflect.Value) RowVersion {
	if m.version == nil {
		return 0
	}
	v, _ := m.version.ValueOf(ctx, rv)
	version, _ := snapshotValue(v).(RowVersion)
	return version
}

// current reads the token values the entity holds now.
func (m *model) current(ctx context.Context, rv reflect.Value) map[string]any {
	values := make(map[string]any, len(m.tokens))
	for _, f := range m.tokens {
		v, _ := f.ValueOf(ctx, rv)
		values[f.DBName] = snapshotValue(v)
	}
	return values
}

// key formats the primary key of rv; ok is false when a key field is zero (not a stored entity).
func key(ctx context.Context, s *schema.Schema, rv reflect.Value) (string, bool) {
	if len(s.PrimaryFields) == 0 {
		return "", false
	}
	parts := make([]string, 0, len(s.PrimaryFields))
	for _, f := range s.PrimaryFields {
		v, zero := f.ValueOf(ctx, rv)
		if zero {
			return "", false
		}
		parts = append(parts, fmt.Sprint(snapshotValue(v)))
	}
	return strings.Join(parts, ","), true
}
