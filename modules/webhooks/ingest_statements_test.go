package webhooks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func Test_an_event_costs_the_same_statements_whatever_the_number_of_its_subscriptions(t *testing.T) {
	log := &statementLog{}
	h := newHarness(t, testConfig(), harnessOptions{tracer: log})
	h.subscribe("http://127.0.0.1:9/0", "one.*", "many.*")
	for i := 1; i < 20; i++ {
		h.subscribe(fmt.Sprintf("http://127.0.0.1:9/%d", i), "many.*")
	}
	ctx := log.mark(tenantContext())
	statements := map[int][]string{}
	for _, c := range []struct {
		eventType  string
		deliveries int
	}{{"one.created", 1}, {"many.created", 20}, {"one.created", 1}, {"many.created", 20}} {
		res, err := h.svc.PublishEvent(ctx, EventInput{Type: c.eventType, Data: []byte(`{"n":1}`)})
		require.NoError(t, err)
		require.Equal(t, c.deliveries, res.Deliveries)
		statements[c.deliveries] = log.take() // the second round counts: caches are warm
	}
	one, twenty := statements[1], statements[20]
	t.Logf("an event with 20 subscriptions:\n%s", strings.Join(twenty, "\n"))
	assert.Equal(t, one, twenty, "the same statements, word for word (planned once), with 1 subscription and with 20")
	assert.LessOrEqual(t, len(twenty), 6, "begin, event, subscriptions, deliveries, outbox, commit:\n%s",
		strings.Join(twenty, "\n"))
	var deliveries int64
	require.NoError(t, h.db.Gorm().Raw(`SELECT count(*) FROM webhook_deliveries`).Scan(&deliveries).Error)
	assert.EqualValues(t, 42, deliveries)
}
