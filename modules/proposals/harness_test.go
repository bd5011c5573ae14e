package proposals_test

import (
	"testing"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/proposals"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
)

// harnessOptions choose what a replica runs. The zero value serves HTTP only (no bus, no job runner),
// so every event stays in the outbox where a test can count it.
type harnessOptions struct {
	background bool // run the messaging bus and the job runner
}

// replica is one process's worth of the proposals module on the harness's database and broker.
type replica struct {
	*hosttest.Replica
	db *database.DB // the replica's own pool
}

// harness is a fresh database and exchange shared by the replicas started on it; events records
// what any of them consumed.
type harness struct {
	t      *testing.T
	db     *dbtest.Database
	bus    messaging.Config
	events *hosttest.Recorder
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, db: dbtest.Create(t, migrations.Sets("proposals")...), bus: hosttest.Broker(), events: &hosttest.Recorder{}}
}

// start runs one replica until the end of the test.
func (h *harness) start(opts harnessOptions) *replica {
	h.t.Helper()
	db := h.db.Open(h.t)
	r := hosttest.Start(h.t, db, hosttest.Options{Messaging: h.bus, Background: opts.background}, proposals.New(), h.events)
	return &replica{Replica: r, db: db}
}
