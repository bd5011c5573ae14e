package concurrency_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/keelson/keelson/platform/concurrency"
)

func TestTwoReplicasStaleSaveConflicts(t *testing.T) {
	ours, theirs := replicas(t)
	created := createOrder(t, ours, "A")

	mine := loadOrder(t, ours, created.ID)
	other := loadOrder(t, theirs, created.ID)
	if mine.Version != other.Version {
		t.Fatalf("same row read with versions %v and %v", mine.Version, other.Version)
	}

	other.Code = "theirs"
	if err := theirs.WithTx(ctx(t), func(c context.Context) error { return theirs.Conn(c).Save(&other).Error }); err != nil {
		t.Fatalf("their save: %v", err)
	}
	if other.Version == mine.Version {
		t.Fatalf("their save did not refresh the version (still %v)", other.Version)
	}

	mine.Code = "ours"
	err := ours.WithTx(ctx(t), func(c context.Context) error { return ours.Conn(c).Save(&mine).Error })
	requireConflict(t, err, "Order", "orders", strconv.FormatInt(created.ID, 10))

	fresh := loadOrder(t, ours, created.ID)
	if fresh.Code != "theirs" || fresh.Version != other.Version {
		t.Fatalf("fresh read = %q@%v, want theirs@%v", fresh.Code, fresh.Version, other.Version)
	}
}

func TestVersionIsXminNotAColumn(t *testing.T) {
	db, _ := replicas(t)
	o := createOrder(t, db, "A")
	if o.Version == 0 {
		t.Fatal("Create did not return the row version")
	}

	var columns int
	if err := db.SQL().QueryRowContext(ctx(t),
		`SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders' AND column_name = 'xmin'`).Scan(&columns); err != nil {
		t.Fatal(err)
	}
	if columns != 0 {
		t.Fatalf("orders has a real xmin column: the version must be the system column")
	}

	read := loadOrder(t, db, o.ID)
	var xmin uint32
	if err := db.SQL().QueryRowContext(ctx(t), `SELECT xmin::text::bigint FROM orders WHERE id = $1`, o.ID).Scan(&xmin); err != nil {
		t.Fatal(err)
	}
	if uint32(read.Version) != xmin {
		t.Fatalf("read version %v, xmin is %d", read.Version, xmin)
	}

	if _, err := db.SQL().ExecContext(ctx(t), `UPDATE orders SET qty = qty + 1 WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	again := loadOrder(t, db, o.ID)
	if again.Version == read.Version {
		t.Fatalf("a raw update left the version at %v", read.Version)
	}
	requireConflict(t, db.Conn(ctx(t)).Model(&read).Update("qty", 9).Error, "Order", "orders", strconv.FormatInt(o.ID, 10))
}

func TestStaleSaveNeitherUpsertsNorResurrects(t *testing.T) {
	ours, theirs := replicas(t)
	a := createOrder(t, ours, "A")
	b := createOrder(t, ours, "B")
	key := func(id int64) string { return strconv.FormatInt(id, 10) }

	staleA := loadOrder(t, ours, a.ID)
	if err := theirs.Conn(ctx(t)).Model(&Order{}).Where("id = ?", a.ID).Update("code", "theirs").Error; err != nil {
		t.Fatal(err)
	}
	staleA.Code, staleA.Qty = "ours", 42
	requireConflict(t, ours.Conn(ctx(t)).Save(&staleA).Error, "Order", "orders", key(a.ID))
	if got := loadOrder(t, ours, a.ID); got.Code != "theirs" || got.Qty != 1 {
		t.Fatalf("row after stale save = %q/%d, want theirs/1", got.Code, got.Qty)
	}

	staleB := loadOrder(t, ours, b.ID)
	if err := theirs.Conn(ctx(t)).Exec(`DELETE FROM orders WHERE id = ?`, b.ID).Error; err != nil {
		t.Fatal(err)
	}
	staleB.Code = "resurrected"
	requireConflict(t, ours.Conn(ctx(t)).Save(&staleB).Error, "Order", "orders", key(b.ID))
	var n int64
	if err := ours.Conn(ctx(t)).Model(&Order{}).Where("id = ?", b.ID).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("stale save of a deleted row re-created it")
	}
}

func TestStatusTokenSecondDecisionConflicts(t *testing.T) {
	ours, theirs := replicas(t)
	p := Proposal{Status: "pending"}
	if err := ours.Conn(ctx(t)).Create(&p).Error; err != nil {
		t.Fatal(err)
	}
	var accept, reject Proposal
	if err := ours.Conn(ctx(t)).First(&accept, p.ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := theirs.Conn(ctx(t)).First(&reject, p.ID).Error; err != nil {
		t.Fatal(err)
	}

	accept.Status = "accepted" // the domain method changes the token before Save
	if err := ours.Conn(ctx(t)).Save(&accept).Error; err != nil {
		t.Fatalf("first decision: %v", err)
	}
	reject.Status = "rejected"
	reject.Note = "too late"
	requireConflict(t, theirs.Conn(ctx(t)).Save(&reject).Error, "Proposal", "proposals", strconv.FormatInt(p.ID, 10))

	// Same story through Updates on a copy loaded while pending.
	var late Proposal
	late.ID, late.Status = p.ID, "pending"
	requireConflict(t, theirs.Conn(ctx(t)).Model(&late).Updates(map[string]any{"status": "rejected"}).Error,
		"Proposal", "proposals", strconv.FormatInt(p.ID, 10))

	var final Proposal
	if err := ours.Conn(ctx(t)).First(&final, p.ID).Error; err != nil {
		t.Fatal(err)
	}
	if final.Status != "accepted" || final.Note != "" {
		t.Fatalf("row = %q/%q, want accepted with no note", final.Status, final.Note)
	}

	// The winner's struct remembers the new status: it can keep working on it.
	accept.Note = "shipped"
	if err := ours.Conn(ctx(t)).Save(&accept).Error; err != nil {
		t.Fatalf("second save of the winner: %v", err)
	}
}

func TestUpdatedAtToken(t *testing.T) {
	ours, theirs := replicas(t)
	c := Conversation{Title: "hello"}
	if err := ours.Conn(ctx(t)).Create(&c).Error; err != nil {
		t.Fatal(err)
	}
	var stale Conversation
	if err := theirs.Conn(ctx(t)).First(&stale, c.ID).Error; err != nil {
		t.Fatal(err)
	}

	c.Title = "renamed at once"
	if err := ours.Conn(ctx(t)).Save(&c).Error; err != nil {
		t.Fatalf("update right after create: %v", err)
	}
	c.Title = "renamed twice"
	if err := ours.Conn(ctx(t)).Model(&c).Updates(map[string]any{"title": c.Title}).Error; err != nil {
		t.Fatalf("second update of the same struct: %v", err)
	}

	stale.Title = "stale"
	requireConflict(t, theirs.Conn(ctx(t)).Save(&stale).Error, "Conversation", "conversations", strconv.FormatInt(c.ID, 10))
	var got Conversation
	if err := ours.Conn(ctx(t)).First(&got, c.ID).Error; err != nil {
		t.Fatal(err)
	}
	if got.Title != "renamed twice" {
		t.Fatalf("title = %q", got.Title)
	}
}

func TestStaleDeleteConflicts(t *testing.T) {
	ours, theirs := replicas(t)
	o := createOrder(t, ours, "A")
	stale := loadOrder(t, ours, o.ID)
	if err := theirs.Conn(ctx(t)).Exec(`UPDATE orders SET qty = 7 WHERE id = ?`, o.ID).Error; err != nil {
		t.Fatal(err)
	}
	requireConflict(t, ours.Conn(ctx(t)).Delete(&stale).Error, "Order", "orders", strconv.FormatInt(o.ID, 10))
	fresh := loadOrder(t, ours, o.ID)
	if err := ours.Conn(ctx(t)).Delete(&fresh).Error; err != nil {
		t.Fatalf("delete of a fresh copy: %v", err)
	}
	requireConflict(t, ours.Conn(ctx(t)).Delete(&fresh).Error, "Order", "orders", strconv.FormatInt(o.ID, 10))

	// Soft delete: the UPDATE ... SET deleted_at carries the version too.
	m := Memo{Body: "x"}
	if err := ours.Conn(ctx(t)).Create(&m).Error; err != nil {
		t.Fatal(err)
	}
	var staleMemo Memo
	if err := theirs.Conn(ctx(t)).First(&staleMemo, m.ID).Error; err != nil {
		t.Fatal(err)
	}
	m.Body = "edited"
	if err := ours.Conn(ctx(t)).Save(&m).Error; err != nil {
		t.Fatal(err)
	}
	requireConflict(t, theirs.Conn(ctx(t)).Delete(&staleMemo).Error, "Memo", "memos", strconv.FormatInt(m.ID, 10))
	if err := ours.Conn(ctx(t)).Delete(&m).Error; err != nil {
		t.Fatalf("soft delete of the current copy: %v", err)
	}
	var live int64
	ours.Conn(ctx(t)).Model(&Memo{}).Where("id = ?", m.ID).Count(&live)
	if live != 0 {
		t.Fatal("soft delete did not hide the memo")
	}
}

func TestUpdateForms(t *testing.T) {
	ours, theirs := replicas(t)
	o := createOrder(t, ours, "A")
	id := strconv.FormatInt(o.ID, 10)
	db := ours.Conn(ctx(t))

	cur := loadOrder(t, ours, o.ID)
	steps := []struct {
		name string
		run  func(*gorm.DB, *Order) error
	}{
		{"Updates map", func(db *gorm.DB, x *Order) error { return db.Model(x).Updates(map[string]any{"qty": 2}).Error }},
		{"Updates struct", func(db *gorm.DB, x *Order) error { return db.Model(x).Updates(Order{Code: "S"}).Error }},
		{"Update", func(db *gorm.DB, x *Order) error { return db.Model(x).Update("qty", 3).Error }},
		{"UpdateColumn", func(db *gorm.DB, x *Order) error { return db.Model(x).UpdateColumn("qty", 4).Error }},
		{"UpdateColumns", func(db *gorm.DB, x *Order) error {
			return db.Model(x).UpdateColumns(map[string]any{"code": "C"}).Error
		}},
		{"Save", func(db *gorm.DB, x *Order) error { x.Qty = 5; return db.Save(x).Error }},
	}
	for _, s := range steps {
		stale := cur // a copy holding the version before this step
		before := cur.Version
		if err := s.run(db, &cur); err != nil {
			t.Fatalf("%s on the current copy: %v", s.name, err)
		}
		if cur.Version == before {
			t.Fatalf("%s did not refresh the version", s.name)
		}
		requireConflict(t, s.run(theirs.Conn(ctx(t)), &stale), "Order", "orders", id)
	}
	if got := loadOrder(t, ours, o.ID); got.Qty != 5 || got.Code != "C" || got.Version != cur.Version {
		t.Fatalf("row = %+v, want qty 5 code C version %v", got, cur.Version)
	}

	// Where(a).Or(b) must not swallow the version check: (a OR b) AND xmin = v AND id = k.
	other := createOrder(t, ours, "B")
	stale := cur
	if err := ours.Conn(ctx(t)).Exec(`UPDATE orders SET code = code WHERE id = ?`, o.ID).Error; err != nil {
		t.Fatal(err)
	}
	err := db.Model(&stale).Where("qty >= ?", 0).Or("code = ?", "B").Update("qty", 99).Error
	requireConflict(t, err, "Order", "orders", id)
	if got := loadOrder(t, ours, o.ID); got.Qty != 5 {
		t.Fatalf("OR condition let a stale update through: qty = %d", got.Qty)
	}
	if got := loadOrder(t, ours, other.ID); got.Qty != 1 {
		t.Fatalf("OR condition touched another row: qty = %d", got.Qty)
	}
	fresh := loadOrder(t, ours, o.ID)
	if err := db.Model(&fresh).Where("qty >= ?", 0).Or("code = ?", "B").Update("qty", 6).Error; err != nil {
		t.Fatalf("fresh update with OR condition: %v", err)
	}

	// A bulk statement matching nothing is not a conflict.
	res := db.Model(&Order{}).Where("code = ?", "nobody").Update("qty", 1)
	if res.Error != nil || res.RowsAffected != 0 {
		t.Fatalf("bulk update of 0 rows: err %v rows %d", res.Error, res.RowsAffected)
	}
	if err := db.Where("code = ?", "nobody").Delete(&Order{}).Error; err != nil {
		t.Fatalf("bulk delete of 0 rows: %v", err)
	}
}

func TestRepeatableReadLoserConflicts(t *testing.T) {
	ours, theirs := replicas(t)
	o := createOrder(t, ours, "A")
	err := ours.Gorm().WithContext(ctx(t)).Transaction(func(tx *gorm.DB) error {
		var mine Order
		if err := tx.First(&mine, o.ID).Error; err != nil { // fixes the snapshot
			return err
		}
		if err := theirs.Conn(ctx(t)).Model(&Order{}).Where("id = ?", o.ID).Update("code", "theirs").Error; err != nil {
			t.Errorf("their update: %v", err)
		}
		mine.Code = "ours"
		return tx.Save(&mine).Error
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	requireConflict(t, err, "Order", "orders", strconv.FormatInt(o.ID, 10))
	var ce *concurrency.ConflictError
	errors.As(err, &ce)
	if ce.Cause() == nil {
		t.Fatalf("a REPEATABLE READ loser should carry SQLSTATE 40001 as cause: %v", err)
	}
}

func TestUpsertsRefused(t *testing.T) {
	db, _ := replicas(t)
	o := createOrder(t, db, "A")
	loaded := loadOrder(t, db, o.ID)
	batch := []Order{loaded, {Code: "new"}}
	if err := db.Conn(ctx(t)).Save(&batch).Error; err == nil {
		t.Fatal("Save(&slice) of a versioned model was accepted")
	}
	up := Order{ID: o.ID, Code: "blind"}
	if err := db.Conn(ctx(t)).Clauses(clause.OnConflict{UpdateAll: true}).Create(&up).Error; err == nil {
		t.Fatal("ON CONFLICT UpdateAll of a versioned model was accepted")
	}
	if got := loadOrder(t, db, o.ID); got.Code != "A" || got.Version != loaded.Version {
		t.Fatalf("refused upserts changed the row: %+v", got)
	}
}

func TestEntityWritesNeedAVersionAndAPointer(t *testing.T) {
	db, _ := replicas(t)
	o := createOrder(t, db, "A")
	blind := Order{ID: o.ID, Code: "blind"}
	if err := db.Conn(ctx(t)).Save(&blind).Error; err == nil || errors.Is(err, concurrency.ErrConflict) {
		t.Fatalf("save without a version: want a usage error, got %v", err)
	}
	loaded := loadOrder(t, db, o.ID)
	if err := db.Conn(ctx(t)).Model(loaded).Update("qty", 3).Error; err == nil {
		t.Fatal("update through a non-addressable model was accepted")
	}
	if got := loadOrder(t, db, o.ID); got.Code != "A" || got.Qty != 1 {
		t.Fatalf("refused writes changed the row: %+v", got)
	}
}

// A version above 2^31 must be bound as a parameter: as a literal PostgreSQL would compare xid with
// bigint and fail. The stale write below always uses one. Real xmins that high need ~2^31 transactions;
// to exercise them, point TEST_DATABASE_URL at a scratch server moved there with
// `vacuumdb --all --freeze; pg_resetwal -x 3000000000` (plus a zeroed pg_xact/0B2D segment).
func TestVersionAbove2To31IsBound(t *testing.T) {
	db, _ := replicas(t)
	o := createOrder(t, db, "A")
	loaded := loadOrder(t, db, o.ID)
	t.Logf("row version %v, above 2^31: %v", loaded.Version, loaded.Version >= 1<<31)

	stale := loaded
	stale.Version = 3_000_000_000
	if stale.Version == loaded.Version {
		stale.Version++
	}
	requireConflict(t, db.Conn(ctx(t)).Save(&stale).Error, "Order", "orders", strconv.FormatInt(o.ID, 10))

	loaded.Qty = 2
	if err := db.Conn(ctx(t)).Save(&loaded).Error; err != nil {
		t.Fatalf("save with the real version %v: %v", loaded.Version, err)
	}
	if err := db.Conn(ctx(t)).Delete(&loaded).Error; err != nil {
		t.Fatalf("delete with the refreshed version %v: %v", loaded.Version, err)
	}
}

func TestSaveWithLoadedChildren(t *testing.T) {
	db, _ := replicas(t)
	c := db.Conn(ctx(t))
	o := Order{Code: "A", Lines: []Line{{Sku: "s1"}}}
	must(t, c.Create(&o).Error)
	var x Order
	must(t, c.Preload("Lines").First(&x, o.ID).Error)
	x.Code = "B"
	if err := c.Save(&x).Error; err != nil {
		t.Fatalf("save of a parent with loaded children: %v", err)
	}
	// FullSaveAssociations upserts every child column: refused on versioned children.
	x.Code = "C"
	if err := c.Session(&gorm.Session{FullSaveAssociations: true}).Save(&x).Error; err == nil || !strings.Contains(err.Error(), "upsert of Line") {
		t.Fatalf("FullSaveAssociations upsert of versioned children: want a refusal naming Line, got %v", err)
	}
	if got := loadOrder(t, db, o.ID); got.Code != "B" {
		t.Fatalf("code = %q after a refused save, want B", got.Code)
	}
}

// A RowVersion must be the system column: a real "version" column would silently defeat the check.
type Misnamed struct {
	ID      int64                  `gorm:"primaryKey"`
	Version concurrency.RowVersion `gorm:"column:version;->"`
}

// Tokens need the embedded snapshot; without it Save after a status change would always conflict.
type Unembedded struct {
	ID     int64  `gorm:"primaryKey"`
	Status string `gorm:"concurrencyToken"`
}

func TestMappingMistakesAreReported(t *testing.T) {
	db, _ := replicas(t)
	var m []Misnamed
	if err := db.Conn(ctx(t)).Table("orders").Find(&m).Error; err == nil {
		t.Fatal("a RowVersion on a column other than xmin was accepted")
	}
	var u []Unembedded
	if err := db.Conn(ctx(t)).Table("proposals").Find(&u).Error; err == nil {
		t.Fatal("tokens without an embedded concurrency.Tokens were accepted")
	}
}
