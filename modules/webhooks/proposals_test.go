package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	pcontract "github.com/keelson/keelson/modules/proposals/contract"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
)

// accepted publishes a proposal.accepted event through the outbox, as the proposals module does.
func (h *harness) accepted(actionType string, params any, times int) uuid.UUID {
	h.t.Helper()
	raw, err := json.Marshal(params)
	require.NoError(h.t, err)
	id := uuid.New()
	ctx := tenantContext()
	e, err := messaging.NewEvent(ctx, "proposals", pcontract.EventProposalAccepted, pcontract.ProposalAccepted{
		Proposal:  pcontract.Proposal{ProposalID: id, ConversationID: uuid.New(), Action: pcontract.Action{Type: actionType, Params: raw}},
		DecidedAt: time.Now().UTC(),
	})
	require.NoError(h.t, err)
	for range times { // the broker may deliver an event more than once
		require.NoError(h.t, h.db.WithTx(ctx, func(ctx context.Context) error { return h.svc.events.Publish(ctx, e) }))
	}
	return id
}

func TestAnAcceptedSubscriptionProposalCreatesOneSubscriptionAndReportsTheResult(t *testing.T) {
	cfg := testConfig()
	cfg.AllowPrivateTargets = false
	h := newHarness(t, cfg, harnessOptions{bus: true})

	good := h.accepted(pcontract.ActionCreateWebhookSubscription,
		pcontract.CreateWebhookSubscriptionParams{URL: "https://hooks.example.com/in", EventTypes: []string{"conversation.*"}}, 2)
	bad := h.accepted(pcontract.ActionCreateWebhookSubscription,
		pcontract.CreateWebhookSubscriptionParams{URL: "http://127.0.0.1:9/in", EventTypes: []string{"*"}}, 1)
	h.accepted(pcontract.ActionRenameConversation, pcontract.RenameConversationParams{Title: "x"}, 1)

	hosttest.Eventually(t, 20*time.Second, func() bool { return len(h.actionResults()) == 2 }, "two results")
	results := map[uuid.UUID]pcontract.ActionResult{}
	for _, r := range h.actionResults() {
		results[r.ProposalID] = r
	}
	require.True(t, results[good].Applied)
	require.False(t, results[bad].Applied)
	require.Contains(t, results[bad].Error, "url")

	subs, err := h.svc.Subscriptions(tenantContext(), uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, subs, 1, "a redelivered proposal.accepted creates nothing twice; a refused one creates nothing")
	require.Equal(t, "https://hooks.example.com/in", subs[0].URL)
	require.Equal(t, []string{"conversation.*"}, []string(subs[0].EventTypes))
	require.True(t, strings.Contains(subs[0].Description, good.String()))
	// All four messages handled (two copies of one proposal, the refused one, the rename): still two results.
	hosttest.Eventually(t, 20*time.Second, func() bool {
		return hosttest.Metric(t, h.registry, "keelson_messages_handled_total", "consumer", proposalsConsumer) == 4
	}, "every proposal.accepted handled")
	require.Len(t, h.actionResults(), 2, "the rename action is not this module's, the duplicate is not applied twice")
}
