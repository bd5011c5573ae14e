// Package tenancy carries the tenant a unit of work acts for, and is the GORM plugin that scopes
// every tenant-owned row to it. Everything a customer owns belongs to one tenant; code that spans
// tenants (the sweep, pruning, the outbox relay) says so by running in a named system context instead
// of simply forgetting the tenant. database.Open installs the plugin (db.Use(tenancy.Plugin{})).
//
// # Mapping
//
// A model is tenant-scoped when it embeds Owned, which maps the tenant_id column:
//
//	type Note struct {
//		ID uuid.UUID `gorm:"type:uuid;primaryKey"`
//		tenancy.Owned
//		Body string
//	}
//
// # What is scoped
//
// With a tenant in the statement's context (tenancy.With), every query (First, Take, Find, Count,
// Pluck, Preload, Scan and Row on a model), update (Save, Updates, Update, UpdateColumn(s)) and delete
// of a scoped model gets `"table"."tenant_id" = <tenant>` ANDed with the caller's conditions, which are
// grouped first so `Where(a).Or(b)` cannot widen it. A row of another tenant is thus not found, not
// updated and not deleted — the same answer as a row that does not exist. Create stamps tenant_id on
// every row (struct, slice, map[string]any) and refuses a row naming another tenant. Updates never
// write tenant_id: a row's owner does not move.
//
// In a system context (tenancy.System(ctx, "sweep")) without a tenant nothing is added: the statement
// spans tenants, and Create requires every row to carry its tenant_id already. A tenant in ctx wins
// over a system context. With neither, every statement on a scoped model fails with ErrNoTenant
// before it reaches the database.
//
// database.DB.Conn binds the returned handle to the ctx it is given, also inside a unit of work, so a
// consumer that restores a message's tenant into ctx is scoped even in a transaction opened earlier.
//
// # Not scoped, by design
//
// Raw SQL (Raw, Exec, and Table("…") without a model) is not model-bound and gets no filter: write
// `tenant_id = ?` into it, or run it in a system context and say why in the reason. Models that do not
// embed Owned (per-subscription state keyed by a scoped parent, platform tables) are not filtered;
// reach them through their scoped parent.
package tenancy
