package tenancy_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/tenancy"
)

// Note is tenant-scoped and versioned, so the two plugins meet on it.
type Note struct {
	ID uuid.UUID `gorm:"type:uuid;primaryKey"`
	tenancy.Owned
	Body    string
	Tags    []Tag
	Version concurrency.RowVersion `gorm:"column:xmin;->;-:migration;default:(-)"`
}

// Tag is a scoped child, for Preload.
type Tag struct {
	ID uuid.UUID `gorm:"type:uuid;primaryKey"`
	tenancy.Owned
	NoteID uuid.UUID
	Name   string
}

// Setting is not tenant-scoped.
type Setting struct {
	Key   string `gorm:"primaryKey"`
	Value string
}

const schemaSQL = `
CREATE TABLE notes (id uuid PRIMARY KEY, tenant_id uuid NOT NULL REFERENCES tenants(id), body text NOT NULL);
CREATE TABLE tags (id uuid PRIMARY KEY, tenant_id uuid NOT NULL REFERENCES tenants(id), note_id uuid NOT NULL REFERENCES notes(id), name text NOT NULL);
CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL);
`

var (
	tenantA = tenancy.DefaultID
	tenantB = uuid.MustParse("00000000-0000-0000-0000-00000000000b")
)

func open(t testing.TB) *database.DB {
	t.Helper()
	db := dbtest.New(t)
	if _, err := db.SQL().ExecContext(context.Background(), schemaSQL); err != nil {
		t.Fatalf("create test tables: %v", err)
	}
	if _, err := db.SQL().ExecContext(context.Background(), `INSERT INTO tenants (id, name) VALUES ($1, 'b')`, tenantB); err != nil {
		t.Fatalf("create tenant b: %v", err)
	}
	return db
}

func base(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func as(t *testing.T, tenant uuid.UUID) context.Context { return tenancy.With(base(t), tenant) }

func createNote(t *testing.T, db *database.DB, tenant uuid.UUID, body string) Note {
	t.Helper()
	n := Note{ID: uuid.New(), Body: body}
	if err := db.Conn(as(t, tenant)).Create(&n).Error; err != nil {
		t.Fatalf("create note %q: %v", body, err)
	}
	if n.TenantID != tenant {
		t.Fatalf("created note carries tenant %s, want %s", n.TenantID, tenant)
	}
	return n
}

func tenantOf(t *testing.T, db *database.DB, id uuid.UUID) uuid.UUID {
	t.Helper()
	var tenant uuid.UUID
	if err := db.SQL().QueryRowContext(base(t), `SELECT tenant_id FROM notes WHERE id = $1`, id).Scan(&tenant); err != nil {
		t.Fatalf("read tenant of %s: %v", id, err)
	}
	return tenant
}

func TestCreateStampsTheTenantOfTheContext(t *testing.T) {
	db := open(t)
	a := createNote(t, db, tenantA, "a")
	b := createNote(t, db, tenantB, "b")
	if got := tenantOf(t, db, a.ID); got != tenantA {
		t.Fatalf("row of a stored with tenant %s", got)
	}
	if got := tenantOf(t, db, b.ID); got != tenantB {
		t.Fatalf("row of b stored with tenant %s", got)
	}
	batch := []Note{{ID: uuid.New(), Body: "b1"}, {ID: uuid.New(), Body: "b2"}}
	if err := db.Conn(as(t, tenantB)).Create(&batch).Error; err != nil {
		t.Fatalf("create batch: %v", err)
	}
	for _, n := range batch {
		if got := tenantOf(t, db, n.ID); got != tenantB {
			t.Fatalf("batch row %s stored with tenant %s", n.Body, got)
		}
	}
}

func TestATenantNeitherSeesNorWritesAnotherTenantsRows(t *testing.T) {
	db := open(t)
	a := createNote(t, db, tenantA, "a")
	b := createNote(t, db, tenantB, "b")
	ctxA := as(t, tenantA)

	var got Note
	if err := db.Conn(ctxA).First(&got, "id = ?", b.ID).Error; !errors.Is(err, gorm.ErrRecordNotFound) {
		t.Fatalf("tenant a reading b's note: %v, want not found", err)
	}
	var all []Note
	if err := db.Conn(ctxA).Order("body").Find(&all).Error; err != nil || len(all) != 1 || all[0].ID != a.ID {
		t.Fatalf("tenant a lists %v (%v), want only its own note", all, err)
	}
	var n int64
	if err := db.Conn(ctxA).Model(&Note{}).Where("body = ?", "x").Or("body = ?", "b").Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("Or() widened the filter: count %d (%v), want 0", n, err)
	}
	var bodies []string
	if err := db.Conn(ctxA).Model(&Note{}).Pluck("body", &bodies).Error; err != nil || len(bodies) != 1 || bodies[0] != "a" {
		t.Fatalf("pluck as a: %v (%v)", bodies, err)
	}
	var body string
	if err := db.Conn(ctxA).Model(&Note{}).Select("body").Where("id = ?", b.ID).Row().Scan(&body); err == nil {
		t.Fatalf("Row() as a read b's note %q", body)
	}

	res := db.Conn(ctxA).Model(&Note{}).Where("id = ?", b.ID).Update("body", "stolen")
	if res.Error != nil || res.RowsAffected != 0 {
		t.Fatalf("bulk update of b's note as a: %d rows, %v", res.RowsAffected, res.Error)
	}
	res = db.Conn(ctxA).Where("id = ?", b.ID).Delete(&Note{})
	if res.Error != nil || res.RowsAffected != 0 {
		t.Fatalf("delete of b's note as a: %d rows, %v", res.RowsAffected, res.Error)
	}
	var stillB Note
	if err := db.Conn(as(t, tenantB)).First(&stillB, "id = ?", b.ID).Error; err != nil || stillB.Body != "b" {
		t.Fatalf("b's note after a's attempts: %+v, %v", stillB, err)
	}

	// A versioned entity of b, as a would hold it after b handed it over: guarded write finds nothing.
	stillB.Body = "stolen"
	if err := db.Conn(ctxA).Save(&stillB).Error; !errors.Is(err, concurrency.ErrConflict) {
		t.Fatalf("save of b's loaded note as a: %v, want a conflict (no row matched)", err)
	}
}

func TestAStatementWithoutTenantIsRefused(t *testing.T) {
	db := open(t)
	n := createNote(t, db, tenantA, "a")
	c := base(t)
	var got []Note
	var count int64
	statements := map[string]error{
		"find":   db.Conn(c).Find(&got).Error,
		"first":  db.Conn(c).First(&Note{}, "id = ?", n.ID).Error,
		"count":  db.Conn(c).Model(&Note{}).Count(&count).Error,
		"create": db.Conn(c).Create(&Note{ID: uuid.New(), Body: "x"}).Error,
		"update": db.Conn(c).Model(&Note{}).Where("id = ?", n.ID).Update("body", "x").Error,
		"delete": db.Conn(c).Where("id = ?", n.ID).Delete(&Note{}).Error,
	}
	for name, err := range statements {
		if !errors.Is(err, tenancy.ErrNoTenant) {
			t.Errorf("%s without tenant: %v, want ErrNoTenant", name, err)
		}
	}
	if got := tenantOf(t, db, n.ID); got != tenantA {
		t.Fatalf("note moved to %s", got)
	}
	// Unscoped models need no tenant.
	if err := db.Conn(c).Create(&Setting{Key: "k", Value: "v"}).Error; err != nil {
		t.Fatalf("create unscoped row without tenant: %v", err)
	}
}

func TestASystemContextSpansTenantsAndCreatesOnlyNamedRows(t *testing.T) {
	db := open(t)
	createNote(t, db, tenantA, "a")
	b := createNote(t, db, tenantB, "b")
	sys := tenancy.System(base(t), "test")

	var all []Note
	if err := db.Conn(sys).Find(&all).Error; err != nil || len(all) != 2 {
		t.Fatalf("system find: %d notes (%v), want both tenants' 2", len(all), err)
	}
	if err := db.Conn(sys).Create(&Note{ID: uuid.New(), Body: "nobody's"}).Error; !errors.Is(err, tenancy.ErrNoTenant) {
		t.Fatalf("system create without tenant_id: %v, want ErrNoTenant", err)
	}
	named := Note{ID: uuid.New(), Owned: tenancy.Owned{TenantID: tenantB}, Body: "b2"}
	if err := db.Conn(sys).Create(&named).Error; err != nil {
		t.Fatalf("system create naming tenant b: %v", err)
	}
	if got := tenantOf(t, db, named.ID); got != tenantB {
		t.Fatalf("system-created row stored with tenant %s", got)
	}
	// A tenant in ctx wins over the system context.
	var onlyA []Note
	if err := db.Conn(tenancy.With(sys, tenantA)).Find(&onlyA).Error; err != nil || len(onlyA) != 1 {
		t.Fatalf("system context with tenant a: %d notes (%v), want 1", len(onlyA), err)
	}
	if err := db.Conn(sys).Model(&Note{}).Where("id = ?", b.ID).Update("body", "swept").Error; err != nil {
		t.Fatalf("system update: %v", err)
	}
}

func TestACreateNamingAnotherTenantIsRefused(t *testing.T) {
	db := open(t)
	n := Note{ID: uuid.New(), Owned: tenancy.Owned{TenantID: tenantB}, Body: "forged"}
	err := db.Conn(as(t, tenantA)).Create(&n).Error
	if err == nil || !strings.Contains(err.Error(), "while acting for tenant") {
		t.Fatalf("create of a b row as a: %v, want refusal", err)
	}
	var count int64
	if err := db.Conn(tenancy.System(base(t), "test")).Model(&Note{}).Count(&count).Error; err != nil || count != 0 {
		t.Fatalf("rows after refused create: %d (%v)", count, err)
	}
}

func TestUpdatesNeverMoveARowToAnotherTenant(t *testing.T) {
	db := open(t)
	n := createNote(t, db, tenantA, "a")
	ctxA := as(t, tenantA)
	if err := db.Conn(ctxA).Model(&Note{}).Where("id = ?", n.ID).Updates(map[string]any{"tenant_id": tenantB, "body": "moved?"}).Error; err != nil {
		t.Fatalf("updates: %v", err)
	}
	loaded := Note{}
	if err := db.Conn(ctxA).First(&loaded, "id = ?", n.ID).Error; err != nil {
		t.Fatalf("load: %v", err)
	}
	loaded.TenantID = tenantB
	loaded.Body = "saved"
	if err := db.Conn(ctxA).Save(&loaded).Error; err != nil {
		t.Fatalf("save: %v", err)
	}
	if got := tenantOf(t, db, n.ID); got != tenantA {
		t.Fatalf("row moved to tenant %s", got)
	}
}

func TestPreloadAndReusedChainsStayScoped(t *testing.T) {
	db := open(t)
	a := createNote(t, db, tenantA, "a")
	// A child of a's note written for b by a system job: a must not see it through Preload.
	sys := tenancy.System(base(t), "test")
	for _, tag := range []Tag{
		{ID: uuid.New(), Owned: tenancy.Owned{TenantID: tenantA}, NoteID: a.ID, Name: "mine"},
		{ID: uuid.New(), Owned: tenancy.Owned{TenantID: tenantB}, NoteID: a.ID, Name: "theirs"},
	} {
		if err := db.Conn(sys).Create(&tag).Error; err != nil {
			t.Fatalf("create tag: %v", err)
		}
	}
	ctxA := as(t, tenantA)
	var got Note
	if err := db.Conn(ctxA).Preload("Tags").First(&got, "id = ?", a.ID).Error; err != nil {
		t.Fatalf("preload: %v", err)
	}
	if len(got.Tags) != 1 || got.Tags[0].Name != "mine" {
		t.Fatalf("preloaded tags %+v, want only a's", got.Tags)
	}

	createNote(t, db, tenantB, "b")
	q := db.Conn(ctxA).Model(&Note{}).Where("body <> ?", "")
	var count int64
	var notes []Note
	if err := q.Count(&count).Error; err != nil {
		t.Fatalf("count: %v", err)
	}
	if err := q.Find(&notes).Error; err != nil {
		t.Fatalf("find after count: %v", err)
	}
	if count != 1 || len(notes) != 1 {
		t.Fatalf("reused chain: count %d, %d notes; want 1 and 1", count, len(notes))
	}
}

func TestATransactionFollowsTheTenantOfTheContextItIsUsedWith(t *testing.T) {
	db := open(t)
	createNote(t, db, tenantA, "a")
	createNote(t, db, tenantB, "b")
	err := db.WithTx(tenancy.System(base(t), "test"), func(c context.Context) error {
		var notes []Note
		if err := db.Conn(tenancy.With(c, tenantB)).Find(&notes).Error; err != nil {
			return err
		}
		if len(notes) != 1 || notes[0].Body != "b" {
			t.Errorf("in a system transaction acting for b: %+v, want b's note only", notes)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("tx: %v", err)
	}
}

func TestRawSQLIsLeftAsWritten(t *testing.T) {
	db := open(t)
	createNote(t, db, tenantA, "a")
	createNote(t, db, tenantB, "b")
	var n int64
	if err := db.Conn(as(t, tenantA)).Raw(`SELECT count(*) FROM notes`).Scan(&n).Error; err != nil || n != 2 {
		t.Fatalf("raw count as a: %d (%v), want 2: raw SQL is scoped by its author", n, err)
	}
}

func TestTheFilterQualifiesTheColumnForJoins(t *testing.T) {
	db := open(t)
	stmt := db.Conn(as(t, tenantA)).Session(&gorm.Session{DryRun: true}).
		Joins("JOIN tags ON tags.note_id = notes.id").Where("tags.name = ?", "x").Or("notes.body = ?", "y").Find(&[]Note{}).Statement
	sql := stmt.SQL.String()
	if !strings.Contains(sql, `WHERE "notes"."tenant_id" = $1 AND (tags.name = $2 OR notes.body = $3)`) {
		t.Fatalf("sql %s", sql)
	}
}

func TestSaveOfAnUnknownRowInsertsForTheTenantAndNeverOverwritesAnotherTenantsRow(t *testing.T) {
	db := open(t)
	b := createNote(t, db, tenantB, "b")
	tagB := Tag{ID: uuid.New(), NoteID: b.ID, Name: "b's"}
	if err := db.Conn(as(t, tenantB)).Save(&tagB).Error; err != nil {
		t.Fatalf("save new tag as b: %v", err)
	}
	var stored Tag
	if err := db.Conn(as(t, tenantB)).First(&stored, "id = ?", tagB.ID).Error; err != nil || stored.TenantID != tenantB {
		t.Fatalf("tag saved as b: %+v, %v", stored, err)
	}
	forged := Tag{ID: tagB.ID, NoteID: b.ID, Name: "a's now"}
	err := db.Conn(as(t, tenantA)).Save(&forged).Error
	if err == nil {
		var after Tag
		_ = db.Conn(as(t, tenantB)).First(&after, "id = ?", tagB.ID).Error
		if after.Name != "b's" {
			t.Fatalf("a's Save overwrote b's tag: %+v", after)
		}
	}
	var after Tag
	if err := db.Conn(as(t, tenantB)).First(&after, "id = ?", tagB.ID).Error; err != nil || after.Name != "b's" || after.TenantID != tenantB {
		t.Fatalf("b's tag after a's Save: %+v, %v", after, err)
	}
}

func dbForBench(b *testing.B) *database.DB { return open(b) }

func benchContext(b *testing.B) context.Context { return tenancy.With(context.Background(), tenantA) }
