// Package concurrency is the GORM plugin for optimistic concurrency on PostgreSQL: row versions on
// xmin and column concurrency tokens. database.Open installs it (db.Use(concurrency.Plugin{})).
//
// # Mapping
//
// Row version — the id of the transaction that last wrote the row, no column to create:
//
//	Version concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
//
// `->` makes it read-only (never written, dropped even from Select("*") updates), `-:migration` keeps
// AutoMigrate from adding a column, `default:(-)` makes Create return it. Use RowVersion.String() as
// the ETag / version value and ParseRowVersion for If-Match.
//
// Column tokens — a column whose value, as read, must still be in the row when the entity is written:
//
//	type Proposal struct {
//		ID     uuid.UUID `gorm:"type:uuid;primaryKey"`
//		Status string    `gorm:"concurrencyToken"`
//		concurrency.Tokens // required with tokens: remembers their values as read
//	}
//
// GORM has no change tracker, so the plugin remembers token values in the embedded concurrency.Tokens
// (an unexported, never-mutated map copied with the struct) after every read and Create and after each
// guarded write. A domain method may change Status before Save; the WHERE still carries the original.
// An entity that was never read through GORM is checked against the token values it holds. A model
// with tokens that does not embed Tokens fails every statement with an error saying so. Copies of an
// entity share nothing mutable, so goroutines may each work on their own copy; reflect.DeepEqual on
// entities now also compares the remembered values.
//
// # What is guarded
//
// Reads of a versioned model add xmin to the implicit SELECT * (First, Take, Find, Preload); joins list
// it through GORM; an explicit Select/Omit or raw SQL is left as written (include xmin yourself, else
// the version stays 0). Save, Updates (struct or map), Update, UpdateColumn(s) and Delete (hard or soft)
// of a stored entity — an addressable struct (pass a pointer) with a non-zero primary key — get
// `AND xmin = <version> AND <token> = <original>`, the caller's WHERE wrapped in parentheses first,
// and `RETURNING xmin` plus the written tokens, which refreshes the struct. Zero rows affected, or
// SQLSTATE 40001 (REPEATABLE READ / SERIALIZABLE losers), become a *ConflictError (errors.Is
// ErrConflict) raised inside GORM's update chain: the statement's transaction rolls back and Save
// never falls back to its INSERT ... ON CONFLICT upsert. A write by condition on a stored entity
// (Model(&p).Where("status = ?", "pending")) that matches nothing is a conflict too.
//
// Not guarded, by design: bulk statements on a blank model (Model(&T{}).Where(...), and
// gorm.G[T]...Where(...).Update) — matching zero rows is fine there — and Exec/Raw. Children that
// Save writes through associations get GORM's usual upsert of their foreign key, unchecked: save
// children explicitly. Scan and Rows/Row run no query callbacks and do not select xmin: read
// versioned entities with First/Take/Find.
//
// Refused with an error (not a conflict): writing a versioned entity whose version is 0 (never loaded,
// or loaded by a Select without xmin: load it, or write by condition), a non-pointer model
// (Model(T{...}), gorm.G[T].Updates(ctx, t): use db.Save(&t)), Save(&slice),
// Clauses(clause.OnConflict{UpdateAll: true}) and FullSaveAssociations on guarded models (blind
// overwrites), a RowVersion not mapped read-only to xmin, and tokens without an embedded Tokens.
//
// A *ConflictError from SQLSTATE 40001 keeps the database error in Cause(); the transaction is aborted
// either way, so return the error and let the unit of work roll back.
//
// # Rules for module authors
//
//   - xmin is a 32-bit transaction id that wraps: compare versions for equality only, never order them.
//   - Within one transaction every write leaves the same xmin (the transaction's id): a second stale copy
//     of a row written earlier in the same transaction is not detected. The check protects between
//     transactions. Under a savepoint (a nested gorm Transaction) xmin is the subtransaction's id;
//     database.WithTx joins the outer transaction instead of opening savepoints.
//   - A dump/restore or a row rewrite by another tool changes xmin: clients get a conflict and reload.
//   - Timestamp tokens rely on database.Now (UTC, microseconds, what PostgreSQL stores). Do not put
//     precision:3 on a token column, nor let a trigger or default rewrite it, and remember UpdateColumn(s)
//     does not bump updated_at: such a write does not move an updated_at token, use a RowVersion then.
//   - Use a RowVersion where a whole row must not change under you; a token where only one column
//     matters (a status decision) and other columns may change concurrently.
package concurrency
