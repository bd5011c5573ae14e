package concurrency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/database"
)

const (
	racers = 50
	rounds = 5
)

// race runs racers goroutines spread over two pools for several rounds. Each racer loads the
// row, waits until every racer has loaded it, then writes; exactly one write per round may win.
func race(t *testing.T, pools [2]*database.DB, load func(context.Context, *database.DB) (any, error),
	write func(context.Context, *database.DB, any, int) error, check func(round, winner int)) {
	t.Helper()
	for round := 0; round < rounds; round++ {
		var (
			loaded  sync.WaitGroup
			done    sync.WaitGroup
			start   = make(chan struct{})
			mu      sync.Mutex
			winners []int
			others  []error
		)
		loaded.Add(racers)
		done.Add(racers)
		for i := 0; i < racers; i++ {
			go func(i int) {
				defer done.Done()
				db := pools[i%2]
				entity, err := load(ctx(t), db)
				loaded.Done()
				if err != nil {
					mu.Lock()
					others = append(others, fmt.Errorf("racer %d load: %w", i, err))
					mu.Unlock()
					return
				}
				<-start
				err = db.WithTx(ctx(t), func(c context.Context) error { return write(c, db, entity, i) })
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, i)
				case !errors.Is(err, concurrency.ErrConflict):
					others = append(others, fmt.Errorf("racer %d: %w", i, err))
				}
			}(i)
		}
		loaded.Wait()
		close(start)
		done.Wait()
		if len(others) > 0 {
			t.Fatalf("round %d: errors other than conflicts: %v", round, others)
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(winners), winners)
		}
		t.Logf("round %d: racer %d won, %d conflicts", round, winners[0], racers-1)
		check(round, winners[0])
	}
}

func TestRaceOnOneVersionedRow(t *testing.T) {
	ours, theirs := replicas(t)
	o := createOrder(t, ours, "A")
	race(t, [2]*database.DB{ours, theirs},
		func(c context.Context, db *database.DB) (any, error) {
			var x Order
			return &x, db.Conn(c).First(&x, o.ID).Error
		},
		func(c context.Context, db *database.DB, e any, i int) error {
			x := e.(*Order)
			x.Qty = i
			x.Code = fmt.Sprintf("racer-%d", i)
			return db.Conn(c).Save(x).Error
		},
		func(round, winner int) {
			got := loadOrder(t, ours, o.ID)
			if got.Qty != winner || got.Code != fmt.Sprintf("racer-%d", winner) {
				t.Fatalf("round %d: row = %d/%q, want the winner %d's write", round, got.Qty, got.Code, winner)
			}
		})
}

func TestRaceOnOneStatusDecision(t *testing.T) {
	ours, theirs := replicas(t)
	p := Proposal{Status: "pending"}
	if err := ours.Conn(ctx(t)).Create(&p).Error; err != nil {
		t.Fatal(err)
	}
	race(t, [2]*database.DB{ours, theirs},
		func(c context.Context, db *database.DB) (any, error) {
			var x Proposal
			return &x, db.Conn(c).First(&x, p.ID).Error
		},
		func(c context.Context, db *database.DB, e any, i int) error {
			x := e.(*Proposal)
			x.Status = "decided"
			x.Note = fmt.Sprintf("racer-%d", i)
			return db.Conn(c).Save(x).Error
		},
		func(round, winner int) {
			var got Proposal
			if err := ours.Conn(ctx(t)).First(&got, p.ID).Error; err != nil {
				t.Fatal(err)
			}
			if got.Status != "decided" || got.Note != fmt.Sprintf("racer-%d", winner) {
				t.Fatalf("round %d: row = %+v, want racer %d's decision", round, got, winner)
			}
			// Back to pending for the next round, outside the plugin like an operator would.
			if err := ours.Conn(ctx(t)).Exec(`UPDATE proposals SET status = 'pending' WHERE id = ?`, p.ID).Error; err != nil {
				t.Fatal(err)
			}
		})
}
