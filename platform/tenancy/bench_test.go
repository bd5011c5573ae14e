package tenancy_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/concurrency"
)

// Plain is Note without tenancy.Owned: the same row read without the plugin's filter.
type Plain struct {
	ID      uuid.UUID `gorm:"type:uuid;primaryKey"`
	Body    string
	Version concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

func (Plain) TableName() string { return "notes" }

// BenchmarkTakeByID compares a primary-key read of a tenant-scoped model with the same read unscoped.
func BenchmarkTakeByID(b *testing.B) {
	db := dbForBench(b)
	ctx := benchContext(b)
	n := Note{ID: uuid.New(), Body: "x"}
	if err := db.Conn(ctx).Create(&n).Error; err != nil {
		b.Fatal(err)
	}
	b.Run("scoped", func(b *testing.B) {
		for b.Loop() {
			var got Note
			if err := db.Conn(ctx).Take(&got, "id = ?", n.ID).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unscoped", func(b *testing.B) {
		for b.Loop() {
			var got Plain
			if err := db.Conn(ctx).Take(&got, "id = ?", n.ID).Error; err != nil {
				b.Fatal(err)
			}
		}
	})
}
