package proposals_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cconv "github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/modules/proposals/contract"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/outbox"
)

const proposalsPath = "/api/v1/assistant/proposals"

const flowTimeout = 30 * time.Second

type proposalBody struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Action         struct {
		Type   string          `json:"type"`
		Params json.RawMessage `json:"params"`
	} `json:"action"`
	Rationale string     `json:"rationale"`
	Status    string     `json:"status"`
	Reason    string     `json:"reason"`
	Error     string     `json:"error"`
	CreatedAt time.Time  `json:"created_at"`
	DecidedAt *time.Time `json:"decided_at"`
	Version   string     `json:"version"`
}

type list[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// publish commits an integration event through the outbox, as another module would.
func publish(t *testing.T, db *database.DB, eventType string, payload any) messaging.Event {
	t.Helper()
	ctx := tenantContext()
	pub, err := outbox.NewPublisher(db, nil)
	require.NoError(t, err)
	e, err := messaging.NewEvent(ctx, "test", eventType, payload)
	require.NoError(t, err)
	require.NoError(t, db.WithTx(ctx, func(ctx context.Context) error { return pub.Publish(ctx, e) }))
	return e
}

func renameAction(title string) cconv.ProposedAction {
	return cconv.ProposedAction{Type: contract.ActionRenameConversation, Params: json.RawMessage(`{"title":"` + title + `"}`)}
}

// reply publishes an assistant reply carrying actions and returns it.
func reply(t *testing.T, r *replica, conversationID uuid.UUID, actions ...cconv.ProposedAction) cconv.AssistantReplyCreated {
	t.Helper()
	rep := cconv.AssistantReplyCreated{
		ConversationID: conversationID, MessageID: uuid.Must(uuid.NewV7()), SourceMessageID: uuid.Must(uuid.NewV7()),
		Actions: actions, Rationale: "because the user asked",
	}
	publish(t, r.db, cconv.EventAssistantReplyCreated, rep)
	return rep
}

func listFor(t *testing.T, r *replica, conversationID uuid.UUID, n int) []proposalBody {
	t.Helper()
	var page list[proposalBody]
	hosttest.Eventually(t, flowTimeout, func() bool {
		page = hosttest.Decode[list[proposalBody]](t, r.Do(t, http.MethodGet, proposalsPath+"?conversation_id="+conversationID.String(), nil))
		return len(page.Items) >= n
	}, "%d proposals", n)
	return page.Items
}

// TestIntakeIsIdempotent: one pending proposal per known action of a reply, however often the reply arrives.
func TestIntakeIsIdempotent(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{background: true})
	conv := uuid.Must(uuid.NewV7())
	rep := reply(t, r, conv,
		renameAction("First"),
		cconv.ProposedAction{Type: "drop_everything", Params: json.RawMessage(`{}`)},
		cconv.ProposedAction{Type: contract.ActionCreateWebhookSubscription, Params: json.RawMessage(`{"url":"http://127.0.0.1:1/x","event_types":["*"]}`)},
	)
	publish(t, r.db, cconv.EventAssistantReplyCreated, rep) // the same reply again, as a new event
	props := listFor(t, r, conv, 2)
	hosttest.Eventually(t, flowTimeout, func() bool { return len(h.events.OfType(contract.EventProposalCreated)) == 2 }, "two proposal.created")
	hosttest.Eventually(t, flowTimeout, func() bool { return len(h.events.OfType(cconv.EventAssistantReplyCreated)) == 2 }, "both replies consumed")
	assert.Equal(t, int64(2), hosttest.Count(t, r.db, `SELECT count(*) FROM proposals`))
	require.Len(t, props, 2)
	types := []string{props[0].Action.Type, props[1].Action.Type}
	assert.ElementsMatch(t, []string{contract.ActionRenameConversation, contract.ActionCreateWebhookSubscription}, types)
	for _, p := range props {
		assert.Equal(t, "pending", p.Status)
		assert.Equal(t, conv.String(), p.ConversationID)
		assert.Equal(t, "because the user asked", p.Rationale)
		assert.Nil(t, p.DecidedAt)
		got := r.Do(t, http.MethodGet, proposalsPath+"/"+p.ID, nil)
		require.Equal(t, http.StatusOK, got.Status)
		assert.Equal(t, `"`+p.Version+`"`, got.Header.Get("ETag"))
		fresh := r.Do(t, http.MethodGet, proposalsPath+"/"+p.ID, nil, "If-None-Match", got.Header.Get("ETag"))
		assert.Equal(t, http.StatusNotModified, fresh.Status, "a conditional read of the current version")
		assert.Empty(t, fresh.Body)
	}
	pending := hosttest.Decode[list[proposalBody]](t, r.Do(t, http.MethodGet, proposalsPath+"?status=pending&limit=1", nil))
	require.Len(t, pending.Items, 1)
	require.NotNil(t, pending.NextCursor)
	next := hosttest.Decode[list[proposalBody]](t, r.Do(t, http.MethodGet, proposalsPath+"?status=pending&limit=1&cursor="+*pending.NextCursor, nil))
	require.Len(t, next.Items, 1)
	assert.NotEqual(t, pending.Items[0].ID, next.Items[0].ID)
	assert.Nil(t, next.NextCursor)
	assert.Empty(t, hosttest.Decode[list[proposalBody]](t, r.Do(t, http.MethodGet, proposalsPath+"?status=applied", nil)).Items)
	assert.Len(t, hosttest.Decode[list[proposalBody]](t, r.Do(t, http.MethodGet, proposalsPath+"?status=&conversation_id=", nil)).Items, 2, "empty filters filter nothing")
	assert.Empty(t, hosttest.Decode[list[proposalBody]](t, r.Do(t, http.MethodGet, proposalsPath+"?conversation_id="+uuid.Must(uuid.NewV7()).String(), nil)).Items)
}

// TestFiftyConcurrentDecisions: 50 accept/reject requests over two replicas on one pending proposal:
// exactly one 200, 49 × 409 proposal_already_decided, and the final status is the winner's decision.
func TestFiftyConcurrentDecisions(t *testing.T) {
	h := newHarness(t)
	replicas := []*replica{h.start(harnessOptions{background: true}), h.start(harnessOptions{})}
	conv := uuid.Must(uuid.NewV7())
	const rounds = 4
	for range rounds {
		reply(t, replicas[0], conv, renameAction("Contested"))
	}
	props := listFor(t, replicas[0], conv, rounds)
	won := map[string]int{}
	for round, p := range props {
		const deciders = 50
		statuses := make([]int, deciders)
		bodies := make([][]byte, deciders)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range deciders {
			done.Go(func() {
				start.Wait()
				r := replicas[i%2]
				var resp *hosttest.Response
				if i%2 == round%2 {
					resp = r.Do(t, http.MethodPost, proposalsPath+"/"+p.ID+"/accept", nil)
				} else {
					resp = r.Do(t, http.MethodPost, proposalsPath+"/"+p.ID+"/reject", map[string]any{"reason": "no"})
				}
				statuses[i], bodies[i] = resp.Status, resp.Body
			})
		}
		start.Done()
		done.Wait()

		winner, lost := -1, 0
		for i, s := range statuses {
			switch s {
			case http.StatusOK:
				require.Equal(t, -1, winner, "two decisions succeeded")
				winner = i
			case http.StatusConflict:
				lost++
				assert.Equal(t, "proposal_already_decided", hosttest.Decode[hosttest.Problem](t, &hosttest.Response{Body: bodies[i]}).Code)
			default:
				t.Fatalf("unexpected status %d: %s", s, bodies[i])
			}
		}
		require.NotEqual(t, -1, winner)
		assert.Equal(t, deciders-1, lost)
		decided := hosttest.Decode[proposalBody](t, &hosttest.Response{Body: bodies[winner]})
		final := hosttest.Decode[proposalBody](t, replicas[1].Do(t, http.MethodGet, proposalsPath+"/"+p.ID, nil))
		assert.Equal(t, decided.Status, final.Status, "the winner's decision stands")
		assert.Equal(t, decided.Version, final.Version)
		assert.Contains(t, []string{"accepted", "rejected"}, final.Status)
		won[final.Status]++
		t.Logf("round %d: %s won, %d × 409", round, final.Status, lost)
	}
	hosttest.Eventually(t, flowTimeout, func() bool {
		return len(h.events.OfType(contract.EventProposalAccepted))+len(h.events.OfType(contract.EventProposalRejected)) == rounds
	}, "one decision event per proposal")
	assert.Len(t, h.events.OfType(contract.EventProposalAccepted), won["accepted"])
	assert.Len(t, h.events.OfType(contract.EventProposalRejected), won["rejected"])
}

// TestActionResults: an applied result ends an accepted proposal applied (with proposal.applied),
// a failed one failed; results are idempotent and ignored for proposals not accepted.
func TestActionResults(t *testing.T) {
	h := newHarness(t)
	r := h.start(harnessOptions{background: true})
	conv := uuid.Must(uuid.NewV7())
	reply(t, r, conv, renameAction("A"), renameAction("B"), renameAction("C"))
	props := listFor(t, r, conv, 3)
	byTitle := map[string]proposalBody{}
	for _, p := range props {
		var params struct{ Title string }
		require.NoError(t, json.Unmarshal(p.Action.Params, &params))
		byTitle[params.Title] = p
	}
	good, bad, untouched := byTitle["A"], byTitle["B"], byTitle["C"]
	for _, p := range []proposalBody{good, bad} {
		require.Equal(t, http.StatusOK, r.Do(t, http.MethodPost, proposalsPath+"/"+p.ID+"/accept", "{}").Status)
	}

	publish(t, r.db, contract.EventActionResult, contract.ActionResult{ProposalID: uuid.MustParse(good.ID), Applied: true})
	publish(t, r.db, contract.EventActionResult, contract.ActionResult{ProposalID: uuid.MustParse(bad.ID), Applied: false, Error: "conversation not found"})
	publish(t, r.db, contract.EventActionResult, contract.ActionResult{ProposalID: uuid.MustParse(untouched.ID), Applied: true})
	publish(t, r.db, contract.EventActionResult, contract.ActionResult{ProposalID: uuid.Must(uuid.NewV7()), Applied: true})

	waitStatus := func(id, status string) proposalBody {
		var p proposalBody
		hosttest.Eventually(t, flowTimeout, func() bool {
			p = hosttest.Decode[proposalBody](t, r.Do(t, http.MethodGet, proposalsPath+"/"+id, nil))
			return p.Status == status
		}, "proposal %s %s", id, status)
		return p
	}
	waitStatus(good.ID, "applied")
	failed := waitStatus(bad.ID, "failed")
	assert.Equal(t, "conversation not found", failed.Error)

	// The same result again, and a contradicting one: nothing changes any more.
	publish(t, r.db, contract.EventActionResult, contract.ActionResult{ProposalID: uuid.MustParse(good.ID), Applied: true})
	publish(t, r.db, contract.EventActionResult, contract.ActionResult{ProposalID: uuid.MustParse(good.ID), Applied: false, Error: "late"})
	hosttest.Eventually(t, flowTimeout, func() bool { return len(h.events.OfType(contract.EventActionResult)) == 6 }, "all results consumed")
	hosttest.Eventually(t, flowTimeout, func() bool {
		return hosttest.Count(t, r.db, `SELECT count(*) FROM inbox_messages WHERE consumer = 'proposals.results'`) == 6
	}, "all results processed by the module")
	assert.Equal(t, "applied", waitStatus(good.ID, "applied").Status)
	assert.Equal(t, "pending", hosttest.Decode[proposalBody](t, r.Do(t, http.MethodGet, proposalsPath+"/"+untouched.ID, nil)).Status)
	// proposal.applied goes through the outbox and the broker: the applied status does not mean it arrived.
	hosttest.Eventually(t, flowTimeout, func() bool { return len(h.events.OfType(contract.EventProposalApplied)) >= 1 }, "proposal.applied forwarded")
	applied := h.events.OfType(contract.EventProposalApplied)
	require.Len(t, applied, 1)
	var payload contract.ProposalApplied
	require.NoError(t, applied[0].Decode(&payload))
	assert.Equal(t, good.ID, payload.ProposalID.String())
	assert.Equal(t, contract.ActionRenameConversation, payload.Action.Type)

	again := r.Do(t, http.MethodPost, proposalsPath+"/"+good.ID+"/accept", nil)
	assert.Equal(t, http.StatusConflict, again.Status, "an applied proposal is decided")
}

// TestDecisionBadInputWritesNothing sends bad input to every proposals route: 4xx problem+json, nothing written.
func TestDecisionBadInputWritesNothing(t *testing.T) {
	h := newHarness(t)
	seed := h.start(harnessOptions{background: true})
	conv := uuid.Must(uuid.NewV7())
	reply(t, seed, conv, renameAction("Keep"))
	p := listFor(t, seed, conv, 1)[0]
	hosttest.Eventually(t, flowTimeout, func() bool { return len(h.events.OfType(contract.EventProposalCreated)) == 1 }, "proposal.created forwarded")

	r := h.start(harnessOptions{}) // HTTP only, so the outbox keeps anything a bad request might write
	item := proposalsPath + "/" + p.ID
	missing := proposalsPath + "/0190a0a0-0000-7000-8000-000000000000"
	tests := []struct {
		name    string
		method  string
		path    string
		body    any
		headers []string
		status  int
		code    string
		field   string
	}{
		{"list: bad status", "GET", proposalsPath + "?status=done", nil, nil, 400, "invalid_query", "status"},
		{"list: bad conversation id", "GET", proposalsPath + "?conversation_id=42", nil, nil, 400, "invalid_query", "conversation_id"},
		{"list: limit 0", "GET", proposalsPath + "?limit=0", nil, nil, 400, "invalid_query", "limit"},
		{"list: bad cursor", "GET", proposalsPath + "?cursor=xyz", nil, nil, 400, "invalid_query", "cursor"},
		{"get: not a UUID", "GET", proposalsPath + "/abc", nil, nil, 404, "not_found", ""},
		{"get: missing", "GET", missing, nil, nil, 404, "not_found", ""},
		{"accept: missing", "POST", missing + "/accept", nil, nil, 404, "not_found", ""},
		{"accept: not a UUID", "POST", proposalsPath + "/abc/accept", nil, nil, 404, "not_found", ""},
		{"accept: unknown field", "POST", item + "/accept", map[string]any{"force": true}, nil, 422, "validation_failed", "force"},
		{"accept: malformed", "POST", item + "/accept", `{`, nil, 400, "malformed_json", ""},
		{"accept: not an object", "POST", item + "/accept", `"yes"`, nil, 422, "validation_failed", ""},
		{"accept: text/plain", "POST", item + "/accept", `{}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", ""},
		{"accept: stale If-Match", "POST", item + "/accept", nil, []string{"If-Match", `"1"`}, 412, "precondition_failed", ""},
		{"accept: no token", "POST", item + "/accept", nil, []string{"Authorization", "Bearer wrong"}, 401, "unauthorized", ""},
		{"reject: reason not a string", "POST", item + "/reject", map[string]any{"reason": 5}, nil, 422, "validation_failed", "reason"},
		{"reject: reason too long", "POST", item + "/reject", map[string]any{"reason": strings.Repeat("r", 1001)}, nil, 422, "validation_failed", "reason"},
		{"reject: NUL in reason", "POST", item + "/reject", map[string]any{"reason": "a\u0000"}, nil, 422, "validation_failed", "reason"},
		{"reject: unknown field", "POST", item + "/reject", map[string]any{"why": "x"}, nil, 422, "validation_failed", "why"},
		{"reject: malformed", "POST", item + "/reject", `{"reason":`, nil, 400, "malformed_json", ""},
		{"reject: too large", "POST", item + "/reject", `{"reason":"` + strings.Repeat("x", 1<<20) + `"}`, nil, 413, "payload_too_large", ""},
		{"reject: missing", "POST", missing + "/reject", map[string]any{}, nil, 404, "not_found", ""},
	}
	before := [2]int64{hosttest.Count(t, r.db, `SELECT count(*) FROM outbox_messages`), hosttest.Count(t, r.db, `SELECT count(*) FROM proposals`)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := r.Do(t, tt.method, tt.path, tt.body, tt.headers...)
			require.Equal(t, tt.status, resp.Status, "%s", resp.Body)
			assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			got := hosttest.Decode[hosttest.Problem](t, resp)
			assert.Equal(t, tt.code, got.Code)
			if tt.field != "" {
				require.NotEmpty(t, got.Errors, "%s", resp.Body)
				assert.Equal(t, tt.field, got.Errors[0].Field)
			}
		})
	}
	after := [2]int64{hosttest.Count(t, r.db, `SELECT count(*) FROM outbox_messages`), hosttest.Count(t, r.db, `SELECT count(*) FROM proposals`)}
	assert.Equal(t, before, after, "no event, no proposal")
	now := hosttest.Decode[proposalBody](t, r.Do(t, http.MethodGet, item, nil))
	assert.Equal(t, "pending", now.Status)
	assert.Equal(t, p.Version, now.Version, "the proposal is unchanged")

	// Empty body and {} are both accepted; a matching If-Match too.
	ok := r.Do(t, http.MethodPost, item+"/reject", "", "If-Match", `"`+p.Version+`"`)
	require.Equal(t, http.StatusOK, ok.Status, "%s", ok.Body)
	rejected := hosttest.Decode[proposalBody](t, ok)
	assert.Equal(t, "rejected", rejected.Status)
	assert.Equal(t, `"`+rejected.Version+`"`, ok.Header.Get("ETag"))
}

func TestASecondAcceptBySameUserReadsAlreadyDecided(t *testing.T) {
	r := newHarness(t).start(harnessOptions{background: true})
	conv := uuid.Must(uuid.NewV7())
	reply(t, r, conv, renameAction("x"))
	id := listFor(t, r, conv, 1)[0].ID
	require.Equal(t, http.StatusOK, r.Do(t, http.MethodPost, proposalsPath+"/"+id+"/accept", nil).Status)
	again := r.Do(t, http.MethodPost, proposalsPath+"/"+id+"/accept", nil)
	require.Equal(t, http.StatusConflict, again.Status)
	p := hosttest.Decode[hosttest.Problem](t, again)
	assert.Equal(t, "proposal_already_decided", p.Code)
	assert.Equal(t, "the proposal was already decided", p.Detail)
}
