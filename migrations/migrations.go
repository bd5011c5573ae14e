// Package migrations embeds the SQL migrations of the platform and of every module, one folder per owner.
package migrations

import (
	"embed"
	"io/fs"

	"github.com/keelson/keelson/platform/database"
)

//go:embed */*.sql
var all embed.FS

// For returns the migrations of one owner ("platform" or a module name), or nil when it has none.
func For(owner string) fs.FS {
	sub, err := fs.Sub(all, owner)
	if err != nil {
		return nil
	}
	if entries, err := fs.ReadDir(sub, "."); err != nil || len(entries) == 0 {
		return nil
	}
	return sub
}

// Sets returns the migration sets of the given owners, in that order.
func Sets(owners ...string) []database.MigrationSet {
	out := make([]database.MigrationSet, len(owners))
	for i, o := range owners {
		out[i] = database.MigrationSet{Owner: o, FS: For(o)}
	}
	return out
}
