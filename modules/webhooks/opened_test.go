package webhooks

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/keelson/keelson/modules/webhooks/internal/signing"
	"github.com/stretchr/testify/require"
)

func (c *openedCache) has(id uuid.UUID) bool {
	_, ok := c.m.Load(id)
	return ok
}

func (c *openedCache) count() int {
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	return n
}

func TestADeletedSubscriptionsOpenedKeysLeaveTheReplicaThatDeletedItAtOnceAndAnotherOnceIdle(t *testing.T) {
	a := newHarness(t, testConfig(), harnessOptions{})
	b := newHarness(t, testConfig(), harnessOptions{database: a.database})
	rc := newReceiver(t, nil)
	deleted, _ := a.subscribe(rc.URL, "order.*")
	kept, _ := a.subscribe(rc.URL, "user.*")
	deletedID, keptID := uuid.MustParse(deleted), uuid.MustParse(kept)

	// Each replica sends to the subscription once: both hold its opened keys.
	a.publish("order.created", map[string]any{"n": 1})
	a.publish("order.created", map[string]any{"n": 2})
	a.publish("user.created", map[string]any{"n": 3})
	requests := a.deliveryRequests()
	require.Len(t, requests, 3)
	for i, r := range requests {
		replica := []*harness{a, b}[i%2]
		require.NoError(t, replica.svc.handleDeliveryRequested(tenantContext(), requestEvent(t, r)))
	}
	require.Equal(t, 3, rc.count())
	require.True(t, a.svc.opened.has(deletedID))
	require.True(t, b.svc.opened.has(deletedID))

	require.Equal(t, http.StatusNoContent, a.call(http.MethodDelete, "/subscriptions/"+deleted, nil).status)
	require.False(t, a.svc.opened.has(deletedID), "the replica that deleted it forgets its keys at once")

	// The other replica never sends to it again; its next send after the idle bound drops the entry.
	sub, err := b.svc.Subscription(tenantContext(), keptID)
	require.NoError(t, err)
	later := time.Now().Add(openedIdle + openedPruneEvery + time.Second)
	_, _, err = b.svc.opened.of(&sub, later, b.svc.sealer, b.svc.opened.forgetsSeen())
	require.NoError(t, err)
	require.False(t, b.svc.opened.has(deletedID), "an idle entry goes")
	require.True(t, b.svc.opened.has(keptID), "the subscription being sent to is cached again")
	require.Equal(t, int64(b.svc.opened.count()), b.svc.opened.size.Load())
}

func TestTheOpenedCacheKeepsAtMostItsLimitAndDropsTheLeastRecentlyUsed(t *testing.T) {
	const limit = 100
	c := &openedCache{max: limit}
	secret, err := signing.NewSecret()
	require.NoError(t, err)
	subs := make([]*Subscription, 3*limit)
	start := time.Now()
	for i := range subs {
		subs[i] = &Subscription{ID: uuid.New(), Secret: secret, Version: 1}
		now := start.Add(time.Duration(i) * 2 * time.Second)
		_, _, err := c.of(subs[i], now, sealer{}, 0)
		require.NoError(t, err)
		// The first one stays in use all along.
		_, _, err = c.of(subs[0], now.Add(time.Second), sealer{}, 0)
		require.NoError(t, err)
		require.LessOrEqual(t, c.count(), limit, "after %d subscriptions", i+1)
	}
	require.Equal(t, int64(c.count()), c.size.Load(), "the size counter matches the entries")
	require.GreaterOrEqual(t, c.count(), limit*3/4)
	require.True(t, c.has(subs[0].ID), "the one in use stays")
	require.True(t, c.has(subs[len(subs)-1].ID), "the newest stays")
	require.False(t, c.has(subs[1].ID), "the least recently used went")
}

func TestKeysOpenedFromARowReadBeforeTheReplicaForgotTheSubscriptionAreNotKept(t *testing.T) {
	c := &openedCache{}
	secret, err := signing.NewSecret()
	require.NoError(t, err)
	sub := &Subscription{ID: uuid.New(), Secret: secret, Version: 1}

	seen := c.forgetsSeen() // the send reads the row, then the subscription is deleted here
	c.forget(sub.ID)
	keys, _, err := c.of(sub, time.Now(), sealer{}, seen)
	require.NoError(t, err)
	require.Len(t, keys, 1, "the send still signs with what it read")
	require.False(t, c.has(sub.ID), "but does not put the deleted subscription's keys back")
	require.Zero(t, c.size.Load())

	_, _, err = c.of(sub, time.Now(), sealer{}, c.forgetsSeen())
	require.NoError(t, err)
	require.True(t, c.has(sub.ID), "a row read after the forget is kept")
	require.Equal(t, int64(1), c.size.Load())
}

func TestTheReplicasLoopDropsIdleOpenedKeysWithoutAnySendAndEndsWithItsContext(t *testing.T) {
	c := &openedCache{}
	secret, err := signing.NewSecret()
	require.NoError(t, err)
	sub := &Subscription{ID: uuid.New(), Secret: secret, Version: 1}
	start := time.Now()
	_, _, err = c.of(sub, start, sealer{}, c.forgetsSeen())
	require.NoError(t, err)

	later := func() time.Time { return start.Add(openedIdle + openedPruneEvery + time.Second) }
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- c.pruneLoop(ctx, 10*time.Millisecond, later) }()
	require.Eventually(t, func() bool { return !c.has(sub.ID) }, 10*time.Second, 10*time.Millisecond, "the idle entry goes with no send")
	require.Zero(t, c.size.Load())
	cancel()
	select {
	case err := <-ended:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
}
