package concurrency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

// Order is versioned by xmin only.
type Order struct {
	ID      int64 `gorm:"primaryKey"`
	Code    string
	Qty     int
	Lines   []Line
	Version concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

// Line is a versioned child, for Preload.
type Line struct {
	ID      int64 `gorm:"primaryKey"`
	OrderID int64
	Sku     string
	Version concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

// Proposal is guarded by its status token only, so xmin cannot be what catches the second decision.
type Proposal struct {
	ID     int64  `gorm:"primaryKey"`
	Status string `gorm:"concurrencyToken"`
	Note   string
	concurrency.Tokens
}

// Conversation is guarded by its updated_at token only.
type Conversation struct {
	ID        int64 `gorm:"primaryKey"`
	Title     string
	CreatedAt time.Time
	UpdatedAt time.Time `gorm:"concurrencyToken"`
	concurrency.Tokens
}

// Memo is soft-deleted and versioned.
type Memo struct {
	ID        int64 `gorm:"primaryKey"`
	Body      string
	DeletedAt gorm.DeletedAt
	Version   concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

const schemaSQL = `
CREATE TABLE orders (id bigserial PRIMARY KEY, code text NOT NULL, qty integer NOT NULL DEFAULT 0);
CREATE TABLE lines (id bigserial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders(id), sku text NOT NULL);
CREATE TABLE proposals (id bigserial PRIMARY KEY, status text NOT NULL, note text NOT NULL DEFAULT '');
CREATE TABLE conversations (id bigserial PRIMARY KEY, title text NOT NULL, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL);
CREATE TABLE memos (id bigserial PRIMARY KEY, body text NOT NULL, deleted_at timestamptz);
`

// replicas returns two pools on one fresh database: ours and theirs.
func replicas(t *testing.T) (ours, theirs *database.DB) {
	t.Helper()
	d := dbtest.Create(t)
	ours = d.Open(t)
	theirs = d.Open(t)
	if _, err := ours.SQL().ExecContext(context.Background(), schemaSQL); err != nil {
		t.Fatalf("create test tables: %v", err)
	}
	return ours, theirs
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// requireConflict asserts err is a *ConflictError about entity/table/key.
func requireConflict(t *testing.T, err error, entity, table, key string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a conflict on %s %s, got nil", entity, key)
	}
	var ce *concurrency.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("want *ConflictError, got %T: %v", err, err)
	}
	if !errors.Is(err, concurrency.ErrConflict) {
		t.Fatalf("errors.Is(err, ErrConflict) false for %v", err)
	}
	if ce.EntityType() != entity || ce.Table() != table || ce.Key() != key {
		t.Fatalf("conflict names %s/%s/%s, want %s/%s/%s", ce.EntityType(), ce.Table(), ce.Key(), entity, table, key)
	}
}

func createOrder(t *testing.T, db *database.DB, code string) Order {
	t.Helper()
	o := Order{Code: code, Qty: 1}
	if err := db.Conn(ctx(t)).Create(&o).Error; err != nil {
		t.Fatalf("create order: %v", err)
	}
	return o
}

func loadOrder(t *testing.T, db *database.DB, id int64) Order {
	t.Helper()
	var o Order
	if err := db.Conn(ctx(t)).First(&o, id).Error; err != nil {
		t.Fatalf("load order %d: %v", id, err)
	}
	if o.Version == 0 {
		t.Fatalf("order %d loaded without its row version", id)
	}
	return o
}
