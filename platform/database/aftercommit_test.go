package database_test

import (
	"context"
	"errors"
	"testing"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
)

func TestAfterCommitRunsOnceTheOutermostUnitOfWorkCommitsAndNeverAfterARollback(t *testing.T) {
	db := dbtest.New(t)
	ctx := context.Background()
	var ran []string

	err := db.WithTx(ctx, func(ctx context.Context) error {
		database.AfterCommit(ctx, func() { ran = append(ran, "outer") })
		if err := db.WithTx(ctx, func(ctx context.Context) error { // joins the outer unit of work
			database.AfterCommit(ctx, func() { ran = append(ran, "joined") })
			return nil
		}); err != nil {
			return err
		}
		if len(ran) != 0 {
			t.Errorf("hooks ran before the commit: %v", ran)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ran) != 2 || ran[0] != "outer" || ran[1] != "joined" {
		t.Fatalf("after the commit: ran %v, want [outer joined]", ran)
	}

	ran = nil
	rollback := errors.New("rollback")
	err = db.WithTx(ctx, func(ctx context.Context) error {
		database.AfterCommit(ctx, func() { ran = append(ran, "rolled back") })
		return rollback
	})
	if !errors.Is(err, rollback) || len(ran) != 0 {
		t.Fatalf("after a rollback: err %v, ran %v; want the rollback and nothing run", err, ran)
	}

	database.AfterCommit(ctx, func() { ran = append(ran, "alone") })
	if len(ran) != 1 {
		t.Fatalf("outside a unit of work: ran %v, want it at once", ran)
	}
}
