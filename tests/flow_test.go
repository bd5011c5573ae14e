package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/host/hosttest"
)

type conversation struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Version string `json:"version"`
}

type proposal struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Status         string `json:"status"`
	Action         struct {
		Type   string         `json:"type"`
		Params map[string]any `json:"params"`
	} `json:"action"`
}

// TestRenameThroughAnAcceptedProposalAcrossReplicas drives every module through the binary: a
// conversation created on one replica, a `/rename` message answered by the assistant's job, the
// proposal accepted on both replicas at once (one wins), the rename applied by the conversations
// module, and every public event delivered as a signed webhook.
func TestRenameThroughAnAcceptedProposalAcrossReplicas(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	c.subscribe("conversations", []string{"conversation.*"}, true)
	c.subscribe("proposals", []string{"proposal.*"}, true)
	ctx := context.Background()

	var conv conversation
	if _, err := c.api(0).do(ctx, http.MethodPost, "/conversations", map[string]any{"title": "Trip"}, &conv); err != nil {
		t.Fatal(err)
	}
	if _, err := c.api(1).do(ctx, http.MethodPost, "/conversations/"+conv.ID+"/messages", map[string]any{"content": "/rename Trip to Lisbon"}, nil); err != nil {
		t.Fatal(err)
	}

	var pending proposal
	hosttest.Eventually(t, 30*time.Second, func() bool {
		var list struct {
			Items []proposal `json:"items"`
		}
		q := url.Values{"conversation_id": {conv.ID}, "status": {"pending"}}
		if _, err := c.api(0).do(ctx, http.MethodGet, "/assistant/proposals?"+q.Encode(), nil, &list); err != nil || len(list.Items) == 0 {
			return false
		}
		pending = list.Items[0]
		return true
	}, "the assistant's proposal")
	if pending.Action.Type != "rename_conversation" || pending.Action.Params["title"] != "Trip to Lisbon" {
		t.Fatalf("proposal %+v", pending)
	}

	// Both replicas accept at once: one decision wins, the other is told it lost.
	statuses := make([]int, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = c.api(i).do(ctx, http.MethodPost, "/assistant/proposals/"+pending.ID+"/accept", nil, nil)
		}()
	}
	wg.Wait()
	if sort.Ints(statuses); statuses[0] != http.StatusOK || statuses[1] != http.StatusConflict {
		t.Fatalf("concurrent accepts answered %v, want one 200 and one 409", statuses)
	}

	hosttest.Eventually(t, 30*time.Second, func() bool {
		var got conversation
		var p proposal
		_, err1 := c.api(1).do(ctx, http.MethodGet, "/conversations/"+conv.ID, nil, &got)
		_, err2 := c.api(0).do(ctx, http.MethodGet, "/assistant/proposals/"+pending.ID, nil, &p)
		return err1 == nil && err2 == nil && got.Title == "Trip to Lisbon" && p.Status == "applied"
	}, "the rename and the applied proposal")

	want := map[string]map[string]int{
		"conversations": {"conversation.created": 1, "conversation.message.created": 2, "conversation.renamed": 1},
		"proposals":     {"proposal.created": 1, "proposal.accepted": 1, "proposal.applied": 1},
	}
	hosttest.Eventually(t, 30*time.Second, func() bool {
		for endpoint, types := range want {
			got := c.receiver.TypesAt(endpoint)
			for typ, n := range types {
				if got[typ] != n {
					return false
				}
			}
		}
		return true
	}, "the webhooks of every public event")
	for endpoint, types := range want {
		if got := c.receiver.TypesAt(endpoint); fmt.Sprint(got) != fmt.Sprint(types) {
			t.Errorf("%s received %v, want %v", endpoint, got, types)
		}
	}
	s := c.receiver.Stats(nil)
	if s.BadSignatures != 0 || s.Duplicates != 0 {
		t.Errorf("bad signatures %d, duplicates %d", s.BadSignatures, s.Duplicates)
	}
}
