package webhooks

import (
	"testing"
	"time"

	"github.com/google/uuid"
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
	require.True(t, d.IsClaimedBy(claim))
	require.False(t, d.IsClaimedBy(uuid.New()))
	require.Equal(t, now.Add(time.Minute), *d.NextAttemptAt)

	again := d.Claim(now, time.Minute, "test")
	require.NotEqual(t, claim, again)
	require.False(t, d.IsClaimedBy(claim), "a new claim makes the previous one stale")
	require.True(t, d.IsClaimedBy(again))
}

func TestFailuresFollowTheScheduleThenTheDeliveryFails(t *testing.T) {
	now := time.Now()
	d, claim := testDelivery(t, now)
	schedule := []time.Duration{time.Second, time.Minute}

	d.StartAttempt(now, time.Minute, time.Minute, "test")
	require.False(t, d.MarkFailed(now, 500, "http_status: 500", schedule, noJitter))
	require.False(t, d.IsClaimedBy(claim))
	require.Equal(t, now.Add(time.Second), *d.NextAttemptAt)
	require.Equal(t, 500, *d.LastStatusCode)

	d.Claim(now, time.Minute, "test")
	d.StartAttempt(now, time.Minute, time.Minute, "test")
	require.False(t, d.MarkFailed(now, 0, "timeout: slow", schedule, noJitter))
	require.Nil(t, d.LastStatusCode)
	require.Equal(t, now.Add(time.Minute), *d.NextAttemptAt)

	d.Claim(now, time.Minute, "test")
	d.StartAttempt(now, time.Minute, time.Minute, "test")
	require.True(t, d.MarkFailed(now, 503, "http_status: 503", schedule, noJitter))
	require.Equal(t, StatusFailed, d.Status)
	require.Equal(t, 3, d.AttemptCount)
	require.Nil(t, d.NextAttemptAt)

	claim = d.Redeliver(now, time.Minute, "test")
	require.True(t, d.IsClaimedBy(claim))
	require.Equal(t, TriggerRedeliver, d.NextTrigger)
	require.Equal(t, 4, d.NextAttemptNumber())
	require.False(t, d.MarkFailed(now, 500, "again", schedule, noJitter), "a redelivery starts a fresh round")
	require.Equal(t, TriggerScheduled, d.NextTrigger)
}

func TestSuccessClearsTheClaim(t *testing.T) {
	d, claim := testDelivery(t, time.Now())
	d.MarkSucceeded(time.Now(), 204)
	require.Equal(t, StatusSucceeded, d.Status)
	require.False(t, d.IsClaimedBy(claim))
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
		require.LessOrEqual(t, write, batchWriteTimeout, "%+v", c)
		require.LessOrEqual(t, write+c.send, c.lease, "a restarted lease covers the write and the send: %+v", c)
		keep := keptLease(c.lease, c.send, write)
		require.GreaterOrEqual(t, keep, write+c.send, "a kept lease covers them too: %+v", c)
		require.LessOrEqual(t, keep, c.lease, "%+v", c)
	}
	require.Equal(t, 10*time.Second, DefaultConfig().takeWriteBound(), "the batch's own bound when the slack allows it")
	require.Equal(t, 72500*time.Millisecond, keptLease(2*time.Minute, 15*time.Second, 10*time.Second), "25 s plus half of the 95 s left")
}
