package webhooks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/tenancy"
)

// statementLog records the statements sent under a context it marked, commit included.
type statementLog struct {
	mu    sync.Mutex
	texts []string
}

type statementMark struct{}

func (l *statementLog) mark(ctx context.Context) context.Context {
	return context.WithValue(ctx, statementMark{}, true)
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if ctx.Value(statementMark{}) != nil {
		l.mu.Lock()
		l.texts = append(l.texts, strings.Join(strings.Fields(d.SQL), " "))
		l.mu.Unlock()
	}
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.texts
	l.texts = nil
	return out
}

func TestABatchOfEventsCostsTheSameStatementsWhateverItsEventsAndTheirSubscriptions(t *testing.T) {
	log := &statementLog{}
	h := newHarness(t, testConfig(), harnessOptions{tracer: log})
	h.subscribe("http://127.0.0.1:9/0", "one.*", "many.*")
	for i := 1; i < 20; i++ {
		h.subscribe(fmt.Sprintf("http://127.0.0.1:9/%d", i), "many.*")
	}
	batch := func(eventType string, n int) []ingestRequest {
		reqs := make([]ingestRequest, n)
		for i := range reqs {
			reqs[i] = ingestRequest{ctx: tenantContext(), tenant: tenancy.DefaultID,
				in: EventInput{ID: uuid.NewString(), Type: eventType, Data: []byte(`{"n":1}`)}}
		}
		return reqs
	}
	statements := map[int][]string{}
	for _, c := range []struct {
		eventType          string
		events, deliveries int
	}{{"one.created", 1, 1}, {"many.created", 8, 20}, {"one.created", 1, 1}, {"many.created", 8, 20}} {
		res, err := h.svc.writeIngests(log.mark(context.Background()), batch(c.eventType, c.events))
		require.NoError(t, err)
		for _, r := range res {
			require.True(t, r.stored)
			require.Equal(t, c.deliveries, r.out.Deliveries)
		}
		statements[c.events] = log.take() // the second round counts: caches are warm
	}
	one, eight := statements[1], statements[8]
	t.Logf("a batch of 8 events with 20 subscriptions each:\n%s", strings.Join(eight, "\n"))
	assert.Equal(t, one, eight, "the same statements, word for word (planned once), for 1 event with 1 delivery and for 8 with 20 each")
	assert.LessOrEqual(t, len(eight), 6, "begin, events, subscriptions, deliveries, outbox, commit:\n%s",
		strings.Join(eight, "\n"))
	var deliveries int64
	require.NoError(t, h.db.Gorm().Raw(`SELECT count(*) FROM webhook_deliveries`).Scan(&deliveries).Error)
	assert.EqualValues(t, 2*1+2*8*20, deliveries)
}
