package conversations_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/conversations"
	"github.com/keelson/keelson/modules/proposals"
	"github.com/keelson/keelson/modules/webhooks"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
)

// harnessOptions choose what a replica runs. The zero value serves HTTP only (no bus, no job runner),
// so every event stays in the outbox where a test can count it.
type harnessOptions struct {
	conversations conversations.Config
	background    bool // run the messaging bus (forwarders + consumers) and the jobs runner
}

// replica is one process's worth of the application (conversations, proposals and webhooks) on
// the harness's database and broker.
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
	return &harness{
		t:      t,
		db:     dbtest.Create(t, migrations.Sets("conversations", "proposals", "webhooks")...),
		bus:    hosttest.Broker(),
		events: &hosttest.Recorder{},
	}
}

// start runs one replica until the end of the test.
func (h *harness) start(opts harnessOptions) *replica {
	t := h.t
	t.Helper()
	conv, err := conversations.New(opts.conversations)
	require.NoError(t, err)
	whCfg := webhooks.DefaultConfig()
	whCfg.AllowPrivateTargets = true
	whCfg.SendTimeout = 2 * time.Second
	whCfg.ClaimLease = 5 * time.Second
	whCfg.SweepInterval = 200 * time.Millisecond
	whCfg.RetrySchedule = []time.Duration{200 * time.Millisecond, 500 * time.Millisecond}
	wh, err := webhooks.New(whCfg)
	require.NoError(t, err)

	db := h.db.Open(t)
	r := hosttest.Start(t, db, hosttest.Options{Messaging: h.bus, Background: opts.background}, conv, proposals.New(), wh, h.events)
	return &replica{Replica: r, db: db}
}

// outboxCount counts the events of one type still in the outbox (replicas without a bus keep them all).
func outboxCount(t *testing.T, db *database.DB, eventType string) int64 {
	t.Helper()
	return hosttest.Count(t, db, `SELECT count(*) FROM outbox_messages WHERE payload->'metadata'->>'event_type' = ?`, eventType)
}
