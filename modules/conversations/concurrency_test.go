package conversations_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

func TestPatchWithStaleIfMatchIs412(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{})
	c := createConversation(t, r, "Before")
	first := r.Do(t, http.MethodPatch, conversationsPath+"/"+c.ID, map[string]any{"title": "First"}, "If-Match", `"`+c.Version+`"`)
	require.Equal(t, http.StatusOK, first.Status, "%s", first.Body)

	stale := r.Do(t, http.MethodPatch, conversationsPath+"/"+c.ID, map[string]any{"title": "Second"}, "If-Match", `"`+c.Version+`"`)
	require.Equal(t, http.StatusPreconditionFailed, stale.Status, "%s", stale.Body)
	assert.Equal(t, "precondition_failed", hosttest.Decode[hosttest.Problem](t, stale).Code)

	now := hosttest.Decode[conversationBody](t, r.Do(t, http.MethodGet, conversationsPath+"/"+c.ID, nil))
	assert.Equal(t, "First", now.Title)
	assert.Equal(t, hosttest.Decode[conversationBody](t, first).Version, now.Version)
	assert.Equal(t, int64(1), outboxCount(t, r.db, "conversation.renamed"), "the refused write published nothing")
}

// TestConcurrentPatchesWithOneETag sends 20 PATCHes carrying the same ETag through two replicas
// (two pools): one wins; the others see a stale version (412) or lose the race in the database (409).
func TestConcurrentPatchesWithOneETag(t *testing.T) {
	h := newHarness(t)
	replicas := []*replica{h.start(harnessOptions{}), h.start(harnessOptions{})}
	for round := range 3 {
		c := createConversation(t, replicas[0], fmt.Sprintf("Round %d", round))
		const writers = 20
		statuses := make([]int, writers)
		bodies := make([][]byte, writers)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range writers {
			done.Go(func() {
				start.Wait()
				resp := replicas[i%2].Do(t, http.MethodPatch, conversationsPath+"/"+c.ID,
					map[string]any{"title": fmt.Sprintf("Title %d", i)}, "If-Match", `"`+c.Version+`"`)
				statuses[i], bodies[i] = resp.Status, resp.Body
			})
		}
		start.Done()
		done.Wait()

		winner, conflicts, stale := -1, 0, 0
		for i, s := range statuses {
			switch s {
			case http.StatusOK:
				require.Equal(t, -1, winner, "two PATCHes with one ETag succeeded")
				winner = i
			case http.StatusConflict:
				conflicts++
				assert.Equal(t, "concurrency_conflict", hosttest.Decode[hosttest.Problem](t, &hosttest.Response{Body: bodies[i]}).Code)
			case http.StatusPreconditionFailed:
				stale++
			default:
				t.Fatalf("unexpected status %d: %s", s, bodies[i])
			}
		}
		require.NotEqual(t, -1, winner, "one PATCH must win")
		t.Logf("round %d: 1 × 200, %d × 409, %d × 412", round, conflicts, stale)

		won := hosttest.Decode[conversationBody](t, &hosttest.Response{Body: bodies[winner]})
		now := hosttest.Decode[conversationBody](t, replicas[1].Do(t, http.MethodGet, conversationsPath+"/"+c.ID, nil))
		assert.Equal(t, fmt.Sprintf("Title %d", winner), now.Title, "the winner's title, whole")
		assert.Equal(t, won.Version, now.Version, "the winner's version")
	}
	assert.Equal(t, int64(3), outboxCount(t, replicas[0].db, "conversation.renamed"), "one renamed event per round: losers wrote nothing")
}
