package conversations_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/host/hosttest"
)

type proposalBody struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Action         struct {
		Type   string          `json:"type"`
		Params json.RawMessage `json:"params"`
	} `json:"action"`
	Rationale string     `json:"rationale"`
	Status    string     `json:"status"`
	Error     string     `json:"error"`
	DecidedAt *time.Time `json:"decided_at"`
	Version   string     `json:"version"`
}

const proposalsPath = "/api/v1/assistant/proposals"

// flowTimeout bounds one asynchronous step (outbox → RabbitMQ → consumer, or a job run).
const flowTimeout = 30 * time.Second

// webhookReceiver is a subscriber endpoint recording every webhook it receives.
type webhookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	received []webhookBody
}

type webhookBody struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func newReceiver(t *testing.T) *webhookReceiver {
	w := &webhookReceiver{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b webhookBody
		if json.Unmarshal(raw, &b) == nil {
			w.mu.Lock()
			w.received = append(w.received, b)
			w.mu.Unlock()
		}
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *webhookReceiver) ofType(eventType string) []webhookBody {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []webhookBody
	for _, b := range w.received {
		if b.Type == eventType {
			out = append(out, b)
		}
	}
	return out
}

func subscribe(t *testing.T, r *replica, url string, patterns ...string) string {
	t.Helper()
	resp := r.Do(t, http.MethodPost, "/api/v1/webhooks/subscriptions", map[string]any{"url": url, "event_types": patterns})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	return hosttest.Decode[struct{ ID string }](t, resp).ID
}

func postMessage(t *testing.T, r *replica, conversationID, content string) messageBody {
	t.Helper()
	resp := r.Do(t, http.MethodPost, conversationsPath+"/"+conversationID+"/messages", map[string]any{"content": content})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	return hosttest.Decode[messageBody](t, resp)
}

// waitForReply waits for the assistant's answer to a user message and returns the conversation's messages.
func waitForReply(t *testing.T, r *replica, conversationID string, wantMessages int) []messageBody {
	t.Helper()
	var msgs list[messageBody]
	hosttest.Eventually(t, flowTimeout, func() bool {
		msgs = hosttest.Decode[list[messageBody]](t, r.Do(t, http.MethodGet, conversationsPath+"/"+conversationID+"/messages", nil))
		return len(msgs.Items) >= wantMessages
	}, "%d messages in conversation %s", wantMessages, conversationID)
	return msgs.Items
}

// waitForProposal waits for the conversation's proposals to reach n and returns the newest.
func waitForProposals(t *testing.T, r *replica, conversationID string, n int) []proposalBody {
	t.Helper()
	var page list[proposalBody]
	hosttest.Eventually(t, flowTimeout, func() bool {
		page = hosttest.Decode[list[proposalBody]](t, r.Do(t, http.MethodGet, proposalsPath+"?conversation_id="+conversationID, nil))
		return len(page.Items) >= n
	}, "%d proposals for conversation %s", n, conversationID)
	return page.Items
}

func waitForProposalStatus(t *testing.T, r *replica, id, status string) proposalBody {
	t.Helper()
	var p proposalBody
	hosttest.Eventually(t, flowTimeout, func() bool {
		p = hosttest.Decode[proposalBody](t, r.Do(t, http.MethodGet, proposalsPath+"/"+id, nil))
		return p.Status == status
	}, "proposal %s %s (last: %s %s)", id, status, p.Status, p.Error)
	return p
}

// TestRenameEndToEnd: "/rename X" → assistant message → pending proposal → accept → title X,
// proposal applied, and a webhook subscriber receives conversation.renamed.
func TestRenameEndToEnd(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{background: true})
	receiver := newReceiver(t)
	subscribe(t, r, receiver.URL, "conversation.*", "proposal.*")

	c := createConversation(t, r, "Untitled")
	user := postMessage(t, r, c.ID, "/rename Launch plan")
	msgs := waitForReply(t, r, c.ID, 2)
	require.Len(t, msgs, 2)
	assert.Equal(t, user.ID, msgs[0].ID)
	assert.Equal(t, "assistant", msgs[1].Role)
	assert.Contains(t, msgs[1].Content, "Launch plan")

	props := waitForProposals(t, r, c.ID, 1)
	require.Len(t, props, 1)
	p := props[0]
	assert.Equal(t, "pending", p.Status)
	assert.Equal(t, "rename_conversation", p.Action.Type)
	assert.JSONEq(t, `{"title":"Launch plan"}`, string(p.Action.Params))
	assert.NotEmpty(t, p.Rationale)
	assert.Nil(t, p.DecidedAt)

	accepted := r.Do(t, http.MethodPost, proposalsPath+"/"+p.ID+"/accept", nil)
	require.Equal(t, http.StatusOK, accepted.Status, "%s", accepted.Body)
	ap := hosttest.Decode[proposalBody](t, accepted)
	assert.Contains(t, []string{"accepted", "applied"}, ap.Status)
	assert.NotNil(t, ap.DecidedAt)

	waitForProposalStatus(t, r, p.ID, "applied")
	now := hosttest.Decode[conversationBody](t, r.Do(t, http.MethodGet, conversationsPath+"/"+c.ID, nil))
	assert.Equal(t, "Launch plan", now.Title)

	hosttest.Eventually(t, flowTimeout, func() bool { return len(receiver.ofType("conversation.renamed")) > 0 }, "conversation.renamed webhook")
	var renamed struct {
		ConversationID string `json:"conversation_id"`
		Title          string `json:"title"`
		PreviousTitle  string `json:"previous_title"`
	}
	require.NoError(t, json.Unmarshal(receiver.ofType("conversation.renamed")[0].Data, &renamed))
	assert.Equal(t, c.ID, renamed.ConversationID)
	assert.Equal(t, "Launch plan", renamed.Title)
	assert.Equal(t, "Untitled", renamed.PreviousTitle)
	for typ, n := range map[string]int{"conversation.created": 1, "conversation.message.created": 2,
		"proposal.created": 1, "proposal.accepted": 1, "proposal.applied": 1} {
		hosttest.Eventually(t, flowTimeout, func() bool { return len(receiver.ofType(typ)) == n }, "%d %s webhook(s)", n, typ)
	}

	again := r.Do(t, http.MethodPost, proposalsPath+"/"+p.ID+"/reject", map[string]any{"reason": "too late"})
	require.Equal(t, http.StatusConflict, again.Status, "%s", again.Body)
	assert.Equal(t, "proposal_already_decided", hosttest.Decode[hosttest.Problem](t, again).Code)
	// The recorder is another consumer of the broker: the webhook's arrival does not mean its copy did.
	hosttest.Eventually(t, flowTimeout, func() bool { return len(h.events.OfType("conversation.renamed")) >= 1 }, "conversation.renamed recorded")
	assert.Len(t, h.events.OfType("conversation.renamed"), 1, "applied once")
}

// TestSubscribeEndToEnd: "/subscribe <url> proposal.*" → accept → the subscription exists and
// receives later proposal events.
func TestSubscribeEndToEnd(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{background: true})
	receiver := newReceiver(t)

	c := createConversation(t, r, "Ops")
	postMessage(t, r, c.ID, "/subscribe "+receiver.URL+"/hook proposal.*")
	props := waitForProposals(t, r, c.ID, 1)
	p := props[0]
	require.Equal(t, "create_webhook_subscription", p.Action.Type)
	assert.JSONEq(t, `{"url":"`+receiver.URL+`/hook","event_types":["proposal.*"]}`, string(p.Action.Params))

	accepted := r.Do(t, http.MethodPost, proposalsPath+"/"+p.ID+"/accept", "{}")
	require.Equal(t, http.StatusOK, accepted.Status, "%s", accepted.Body)
	waitForProposalStatus(t, r, p.ID, "applied")

	subs := hosttest.Decode[list[struct {
		ID         string   `json:"id"`
		URL        string   `json:"url"`
		EventTypes []string `json:"event_types"`
	}]](t, r.Do(t, http.MethodGet, "/api/v1/webhooks/subscriptions", nil))
	require.Len(t, subs.Items, 1)
	assert.Equal(t, receiver.URL+"/hook", subs.Items[0].URL)
	assert.Equal(t, []string{"proposal.*"}, subs.Items[0].EventTypes)

	// A later proposal's events reach the new subscriber.
	postMessage(t, r, c.ID, "/rename Ops room")
	props = waitForProposals(t, r, c.ID, 2)
	later := props[0] // newest first
	require.Equal(t, "rename_conversation", later.Action.Type)
	hosttest.Eventually(t, flowTimeout, func() bool {
		for _, b := range receiver.ofType("proposal.created") {
			var d struct {
				ProposalID string `json:"proposal_id"`
			}
			if json.Unmarshal(b.Data, &d) == nil && d.ProposalID == later.ID {
				return true
			}
		}
		return false
	}, "proposal.created of the later proposal delivered")
	rejected := r.Do(t, http.MethodPost, proposalsPath+"/"+later.ID+"/reject", map[string]any{"reason": "keep the name"})
	require.Equal(t, http.StatusOK, rejected.Status, "%s", rejected.Body)
	assert.Equal(t, "rejected", hosttest.Decode[proposalBody](t, rejected).Status)
	hosttest.Eventually(t, flowTimeout, func() bool { return len(receiver.ofType("proposal.rejected")) == 1 }, "proposal.rejected delivered")
	assert.Empty(t, receiver.ofType("conversation.renamed"), "the subscription only asked for proposal.*")
}

// TestEveryMessageGetsOneReply: plain messages get a plain reply and no proposal.
func TestEveryMessageGetsOneReply(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{background: true})
	c := createConversation(t, r, "Chat")
	for _, text := range []string{"hello", "how are you?", "/rename"} {
		postMessage(t, r, c.ID, text)
	}
	msgs := waitForReply(t, r, c.ID, 6)
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		roles[i] = m.Role
	}
	// Replies may interleave with later questions, but each question is answered once.
	assert.ElementsMatch(t, []string{"user", "user", "user", "assistant", "assistant", "assistant"}, roles)
	assert.Equal(t, int64(3), hosttest.Count(t, r.db, `SELECT count(DISTINCT source_message_id) FROM conversation_messages WHERE role = 'assistant'`))
	hosttest.Eventually(t, flowTimeout, func() bool { return len(h.events.OfType("assistant.reply_created")) == 3 }, "three replies published")
	assert.Empty(t, hosttest.Decode[list[proposalBody]](t, r.Do(t, http.MethodGet, proposalsPath, nil)).Items, "no action, no proposal")
}

// TestProposalsThatCannotBeApplied end failed with the owner's reason: a rename of a deleted
// conversation, and a subscription whose pattern the webhooks module refuses.
func TestProposalsThatCannotBeApplied(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{background: true})

	gone := createConversation(t, r, "Soon gone")
	postMessage(t, r, gone.ID, "/rename Never")
	rename := waitForProposals(t, r, gone.ID, 1)[0]
	current := hosttest.Decode[conversationBody](t, r.Do(t, http.MethodGet, conversationsPath+"/"+gone.ID, nil))
	require.Equal(t, http.StatusNoContent, r.Do(t, http.MethodDelete, conversationsPath+"/"+gone.ID, nil, "If-Match", `"`+current.Version+`"`).Status)
	require.Equal(t, http.StatusOK, r.Do(t, http.MethodPost, proposalsPath+"/"+rename.ID+"/accept", nil).Status)
	failed := waitForProposalStatus(t, r, rename.ID, "failed")
	assert.Contains(t, failed.Error, "not found")

	c := createConversation(t, r, "Bad pattern")
	postMessage(t, r, c.ID, "/subscribe http://127.0.0.1:9/hook proposal..created")
	sub := waitForProposals(t, r, c.ID, 1)[0]
	require.Equal(t, "create_webhook_subscription", sub.Action.Type)
	require.Equal(t, http.StatusOK, r.Do(t, http.MethodPost, proposalsPath+"/"+sub.ID+"/accept", nil).Status)
	failed = waitForProposalStatus(t, r, sub.ID, "failed")
	assert.Contains(t, failed.Error, "event_types")
	assert.Empty(t, hosttest.Decode[list[struct{ ID string }]](t, r.Do(t, http.MethodGet, "/api/v1/webhooks/subscriptions", nil)).Items)
	assert.Empty(t, h.events.OfType("proposal.applied"))
}

// TestConcurrentMessagesTouchTheConversation: messages posted at once through two replicas all land,
// each with its reply job and event, and the conversation's updated_at is the last one's time.
func TestConcurrentMessagesTouchTheConversation(t *testing.T) {
	h := newHarness(t)
	replicas := []*replica{h.start(harnessOptions{}), h.start(harnessOptions{})}
	c := createConversation(t, replicas[0], "Busy")
	const writers = 16
	statuses := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			resp := replicas[i%2].Do(t, http.MethodPost, conversationsPath+"/"+c.ID+"/messages", map[string]any{"content": "hi"})
			statuses[i] = resp.Status
			if resp.Status != http.StatusCreated {
				assert.Equal(t, http.StatusConflict, resp.Status, "%s", resp.Body)
				assert.Equal(t, "concurrency_conflict", hosttest.Decode[hosttest.Problem](t, resp).Code)
			}
		})
	}
	wg.Wait()
	created := int64(0)
	for _, s := range statuses {
		if s == http.StatusCreated {
			created++
		}
	}
	require.Equal(t, int64(writers), created, "posts queue on the conversation's row instead of failing")
	db := replicas[0].db
	assert.Equal(t, created, hosttest.Count(t, db, `SELECT count(*) FROM conversation_messages`))
	assert.Equal(t, created, hosttest.Count(t, db, `SELECT count(*) FROM jobs WHERE kind = 'conversations.assistant_reply'`))
	assert.Equal(t, created, outboxCount(t, db, "conversation.message.created"))
	now := hosttest.Decode[conversationBody](t, replicas[1].Do(t, http.MethodGet, conversationsPath+"/"+c.ID, nil))
	var last time.Time
	require.NoError(t, db.Gorm().Raw(`SELECT max(created_at) FROM conversation_messages`).Scan(&last).Error)
	assert.True(t, now.UpdatedAt.Equal(last), "updated_at is the last message's time")
}
