package jobs

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

// Side effects are made idempotent by unique keys: 23505 means "already done", and nothing else may.
func TestIsUniqueViolation_is_true_for_23505_only_on_real_errors(t *testing.T) {
	db := dbtest.New(t)
	ctx := context.Background()
	mustExec(t, db, `CREATE TABLE parents (id int PRIMARY KEY)`)
	mustExec(t, db, `CREATE TABLE effects (id int PRIMARY KEY, parent int REFERENCES parents(id),
		amount int NOT NULL DEFAULT 0 CHECK (amount >= 0), note text)`)
	mustExec(t, db, `INSERT INTO parents VALUES (1), (2)`)
	mustExec(t, db, `INSERT INTO effects (id, parent) VALUES (1, 1), (2, 2)`)

	cases := []struct {
		name   string
		query  string
		code   string
		unique bool
	}{
		{"duplicate key", `INSERT INTO effects (id, parent) VALUES (1, 1)`, "23505", true},
		{"foreign key", `INSERT INTO effects (id, parent) VALUES (3, 99)`, "23503", false},
		{"check", `INSERT INTO effects (id, parent, amount) VALUES (4, 1, -5)`, "23514", false},
		{"not null", `INSERT INTO effects (id, parent, amount) VALUES (5, 1, NULL)`, "23502", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, sqlErr := db.SQL().ExecContext(ctx, tc.query)
			gormErr := db.Conn(ctx).Exec(tc.query).Error
			for via, err := range map[string]error{"database/sql": sqlErr, "gorm": gormErr} {
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != tc.code {
					t.Fatalf("%s: error %v, want SQLSTATE %s", via, err, tc.code)
				}
				if got := database.IsUniqueViolation(err); got != tc.unique {
					t.Errorf("%s: IsUniqueViolation(%s) = %v, want %v", via, tc.code, got, tc.unique)
				}
			}
		})
	}

	t.Run("deadlock", func(t *testing.T) {
		err := provokeDeadlock(t, db.SQL())
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			t.Fatalf("error %v, want SQLSTATE 40P01", err)
		}
		if database.IsUniqueViolation(err) {
			t.Error("a deadlock counted as a unique violation")
		}
	})
	if database.IsUniqueViolation(nil) || database.IsUniqueViolation(errors.New("23505")) {
		t.Error("IsUniqueViolation true for a non-PostgreSQL error")
	}
}

// provokeDeadlock locks two rows in opposite orders from two transactions and returns the victim's error.
func provokeDeadlock(t *testing.T, db *sql.DB) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tx1, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx1.Rollback() }()
	tx2, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx2.Rollback() }()
	if _, err := tx1.ExecContext(ctx, `UPDATE parents SET id = id WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx2.ExecContext(ctx, `UPDATE parents SET id = id WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() {
		_, err := tx1.ExecContext(ctx, `UPDATE parents SET id = id WHERE id = 2`)
		if err != nil {
			_ = tx1.Rollback() // the victim releases its locks so the other finishes
		}
		errs <- err
	}()
	go func() {
		_, err := tx2.ExecContext(ctx, `UPDATE parents SET id = id WHERE id = 1`)
		if err != nil {
			_ = tx2.Rollback()
		}
		errs <- err
	}()
	var victim error
	for range 2 {
		if err := <-errs; err != nil {
			victim = err
		}
	}
	return victim
}
