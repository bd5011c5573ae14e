package webhooks

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/keelson/keelson/modules/webhooks/internal/groupcommit"
	"github.com/stretchr/testify/require"
)

func noJitter(d time.Duration) time.Duration { return d }

func testDelivery(t *testing.T, now time.Time) (*Delivery, uuid.UUID) {
	t.Helper()
	sub := &Subscription{ID: uuid.New()}
	d, claim, err := newDelivery(sub.ID, "evt_1", "a.b", now, time.Minute, "test")
	require.NoError(t, err)
	return d, claim
}

func TestANewDeliveryIsBornClaimedUntilTheLeaseEnds(t *testing.T) {
	now := time.Now()
	d, claim := testDelivery(t, now)
	require.Equal(t, StatusPending, d.Status)
	require.Equal(t, claim, *d.ClaimID)
	require.Equal(t, now.Add(time.Minute), *d.NextAttemptAt)

	again := d.Claim(now, time.Minute, "test")
	require.NotEqual(t, claim, again, "a new claim makes the previous one stale")
	require.Equal(t, again, *d.ClaimID)
}

func TestFailuresFollowTheScheduleThenTheDeliveryFails(t *testing.T) {
	now := time.Now()
	d, _ := testDelivery(t, now)
	schedule := []time.Duration{time.Second, time.Minute}

	require.False(t, d.MarkFailedRetryingAfter(now, 500, "http_status: 500", schedule, noJitter, 0))
	require.Nil(t, d.ClaimID, "a failure ends the claim")
	require.Equal(t, now.Add(time.Second), *d.NextAttemptAt)
	require.Equal(t, 500, *d.LastStatusCode)

	d.Claim(now, time.Minute, "test")
	require.False(t, d.MarkFailedRetryingAfter(now, 0, "timeout: slow", schedule, noJitter, 0))
	require.Nil(t, d.LastStatusCode)
	require.Equal(t, now.Add(time.Minute), *d.NextAttemptAt)

	d.Claim(now, time.Minute, "test")
	require.True(t, d.MarkFailedRetryingAfter(now, 503, "http_status: 503", schedule, noJitter, 0))
	require.Equal(t, StatusFailed, d.Status)
	require.Nil(t, d.NextAttemptAt)

	claim := d.Redeliver(now, time.Minute, "test")
	require.Equal(t, StatusPending, d.Status)
	require.Equal(t, claim, *d.ClaimID)
	require.Equal(t, TriggerRedeliver, d.NextTrigger)
	require.False(t, d.MarkFailedRetryingAfter(now, 500, "again", schedule, noJitter, 0), "a redelivery starts a fresh round")
	require.Equal(t, TriggerScheduled, d.NextTrigger)
}

func TestAReceiversRetryAfterReplacesTheScheduledDelayButNotTheScheduleBound(t *testing.T) {
	now := time.Now()
	d, _ := testDelivery(t, now)
	schedule := []time.Duration{time.Second}
	require.False(t, d.MarkFailedRetryingAfter(now, 429, "http_status: 429", schedule, jitter, 30*time.Second))
	require.Equal(t, now.Add(30*time.Second), *d.NextAttemptAt, "no jitter on the receiver's own delay")
	d.Claim(now, time.Minute, "test")
	require.True(t, d.MarkFailedRetryingAfter(now, 429, "http_status: 429", schedule, jitter, 30*time.Second))
	require.Equal(t, StatusFailed, d.Status)
}

func TestSuccessClearsTheClaim(t *testing.T) {
	d, _ := testDelivery(t, time.Now())
	d.MarkSucceeded(time.Now(), 204)
	require.Equal(t, StatusSucceeded, d.Status)
	require.Nil(t, d.ClaimID)
	require.Nil(t, d.NextAttemptAt)
}

func TestJitterStaysWithinTwentyPercent(t *testing.T) {
	for range 1000 {
		j := jitter(10 * time.Second)
		require.GreaterOrEqual(t, j, 8*time.Second)
		require.LessOrEqual(t, j, 12*time.Second)
	}
}

func TestConfigRequiresALeaseLongerThanTheSendTimeout(t *testing.T) {
	cfg := DefaultConfig()
	require.NoError(t, cfg.Validate())
	cfg.ClaimLease = cfg.SendTimeout
	require.Error(t, cfg.Validate())
	_, err := New(cfg)
	require.Error(t, err)
}

func TestConfigRefusesALeaseThatCannotCoverTheSendAndTheTakesWrite(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ClaimLease = cfg.SendTimeout + 2*minTakeWrite - time.Millisecond
	err := cfg.Validate()
	require.ErrorContains(t, err, "ClaimLease (15.499s) must exceed SendTimeout (15s) by at least 500ms")
	cfg.ClaimLease = cfg.SendTimeout + 2*minTakeWrite
	require.NoError(t, cfg.Validate())
}

func TestALeaseKeptOrRestartedByATakeCoversTheTakesWriteAndTheSend(t *testing.T) {
	for _, c := range []struct{ send, lease time.Duration }{
		{15 * time.Second, 2 * time.Minute}, {2 * time.Second, time.Minute}, {2 * time.Second, 10 * time.Second},
		{200 * time.Millisecond, 2 * time.Second}, {500 * time.Millisecond, 1500 * time.Millisecond},
		{15 * time.Second, 15*time.Second + 2*minTakeWrite},
	} {
		cfg := DefaultConfig()
		cfg.SendTimeout, cfg.ClaimLease = c.send, c.lease
		require.NoError(t, cfg.Validate())
		write := cfg.takeWriteBound()
		require.GreaterOrEqual(t, write, minTakeWrite, "%+v", c)
		require.LessOrEqual(t, write, groupcommit.WriteTimeout, "%+v", c)
		require.LessOrEqual(t, write+c.send, c.lease, "a restarted lease covers the write and the send: %+v", c)
		keep := keptLease(c.lease, c.send, write)
		require.GreaterOrEqual(t, keep, write+c.send, "a kept lease covers them too: %+v", c)
		require.LessOrEqual(t, keep, c.lease, "%+v", c)
	}
	require.Equal(t, 10*time.Second, DefaultConfig().takeWriteBound(), "the batch's own bound when the slack allows it")
	require.Equal(t, 72500*time.Millisecond, keptLease(2*time.Minute, 15*time.Second, 10*time.Second), "25 s plus half of the 95 s left")
}
