package conversations_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestTwentyConcurrentCreatesWithOneIdempotencyKeyOnTwoReplicasMakeOneConversation(t *testing.T) {
	h := newHarness(t)
	replicas := []*replica{h.start(harnessOptions{}), h.start(harnessOptions{})}
	key := uuid.NewString()
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	bodies := make([][]byte, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := replicas[i%2].Do(t, http.MethodPost, conversationsPath, map[string]any{"title": "Once"}, "Idempotency-Key", key)
			statuses[i], bodies[i] = res.Status, res.Body
		}()
	}
	wg.Wait()

	created := 0
	for i, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Errorf("request %d answered %d: %s", i, s, bodies[i])
		}
	}
	require.Positive(t, created)
	assert.EqualValues(t, 1, hosttest.Count(t, replicas[0].db, `SELECT count(*) FROM conversations`), "one conversation for one key")
	assert.Equal(t, int64(1), outboxCount(t, replicas[0].db, "conversation.created"), "one event")

	again := replicas[1].Do(t, http.MethodPost, conversationsPath, map[string]any{"title": "Once"}, "Idempotency-Key", key)
	require.Equal(t, http.StatusCreated, again.Status, "%s", again.Body)
	assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	other := replicas[0].Do(t, http.MethodPost, conversationsPath, map[string]any{"title": "Other"}, "Idempotency-Key", key)
	assert.Equal(t, http.StatusUnprocessableEntity, other.Status)
	assert.Equal(t, "idempotency_key_reused", hosttest.Decode[hosttest.Problem](t, other).Code)
}
