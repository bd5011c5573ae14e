package concurrency_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/keelson/keelson/platform/database/dbtest"
)

// Plain has no version and no token: the same statements without the plugin's work.
type Plain struct {
	ID   int64 `gorm:"primaryKey"`
	Code string
	Qty  int
}

// BenchmarkLoadAndSave prints what the guard costs per load+save round trip against PostgreSQL.
func BenchmarkLoadAndSave(b *testing.B) {
	db := dbtest.New(b)
	c := context.Background()
	if _, err := db.SQL().ExecContext(c, schemaSQL+`CREATE TABLE plains (id bigserial PRIMARY KEY, code text NOT NULL, qty integer NOT NULL);`); err != nil {
		b.Fatal(err)
	}
	conn := db.Conn(c)
	b.Run("plain", loadAndSave(conn, &Plain{Code: "A"}, func(x *Plain, i int) { x.Qty = i }))
	b.Run("xmin", loadAndSave(conn, &Order{Code: "A"}, func(x *Order, i int) { x.Qty = i }))
	b.Run("status token", loadAndSave(conn, &Proposal{Status: "pending"}, func(x *Proposal, _ int) { x.Note = "n" }))
}

// loadAndSave stores row, then in every round loads it by its primary key, changes it and saves it.
func loadAndSave[T any](conn *gorm.DB, row *T, change func(x *T, round int)) func(*testing.B) {
	return func(b *testing.B) {
		if err := conn.Create(row).Error; err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			x := *row // First loads every column by the primary key it carries
			if err := conn.First(&x).Error; err != nil {
				b.Fatal(err)
			}
			change(&x, i)
			if err := conn.Save(&x).Error; err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkBuildSave isolates the plugin's CPU cost: statements are built (DryRun) but not sent.
func BenchmarkBuildSave(b *testing.B) {
	db := dbtest.New(b)
	dry := db.Gorm().Session(&gorm.Session{DryRun: true, SkipDefaultTransaction: true})
	b.Run("plain", buildSave(dry, &Plain{ID: 1, Code: "A"}))
	b.Run("xmin", buildSave(dry, &Order{ID: 1, Code: "A", Version: 7}))
	b.Run("status token", buildSave(dry, &Proposal{ID: 1, Status: "pending"}))
}

// buildSave builds the save of row in every round.
func buildSave[T any](dry *gorm.DB, row *T) func(*testing.B) {
	return func(b *testing.B) {
		for b.Loop() {
			if err := dry.Save(row).Error; err != nil {
				b.Fatal(err)
			}
		}
	}
}
