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
	b.Run("plain", func(b *testing.B) {
		row := Plain{Code: "A"}
		if err := conn.Create(&row).Error; err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			var x Plain
			if err := conn.First(&x, row.ID).Error; err != nil {
				b.Fatal(err)
			}
			x.Qty = i
			if err := conn.Save(&x).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("xmin", func(b *testing.B) {
		row := Order{Code: "A"}
		if err := conn.Create(&row).Error; err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			var x Order
			if err := conn.First(&x, row.ID).Error; err != nil {
				b.Fatal(err)
			}
			x.Qty = i
			if err := conn.Save(&x).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("status token", func(b *testing.B) {
		row := Proposal{Status: "pending"}
		if err := conn.Create(&row).Error; err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			var x Proposal
			if err := conn.First(&x, row.ID).Error; err != nil {
				b.Fatal(err)
			}
			x.Note = "n"
			if err := conn.Save(&x).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkBuildSave isolates the plugin's CPU cost: statements are built (DryRun) but not sent.
func BenchmarkBuildSave(b *testing.B) {
	db := dbtest.New(b)
	dry := db.Gorm().Session(&gorm.Session{DryRun: true, SkipDefaultTransaction: true})
	b.Run("plain", func(b *testing.B) {
		x := Plain{ID: 1, Code: "A"}
		for b.Loop() {
			if err := dry.Save(&x).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("xmin", func(b *testing.B) {
		x := Order{ID: 1, Code: "A", Version: 7}
		for b.Loop() {
			if err := dry.Save(&x).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("status token", func(b *testing.B) {
		x := Proposal{ID: 1, Status: "pending"}
		for b.Loop() {
			if err := dry.Save(&x).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
}
