package webhooks

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func Test_the_send_gate_keeps_a_quarter_of_the_capacity_for_fast_endpoints_whatever_the_others_do(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	g := newSendGate(8, 3, func() time.Time { return now })
	fast := uuid.New()
	admit := func(sub uuid.UUID) bool { p, _, _ := g.admit(sub); return p != nil }

	// Nothing known yet: one probe at a time; once it finished quickly the endpoint is fast.
	p, _, _ := g.admit(fast)
	require.NotNil(t, p)
	require.False(t, admit(fast), "one probe at a time")
	now = now.Add(10 * time.Millisecond)
	g.release(p)
	var passes []*gatePass
	for range 3 {
		p, _, _ := g.admit(fast)
		require.NotNil(t, p, "a fast endpoint gets up to its cap")
		passes = append(passes, p)
	}
	require.False(t, admit(fast), "and no more")
	for _, p := range passes {
		now = now.Add(time.Millisecond)
		g.release(p)
	}

	// Ten endpoints that never answer: probes within a quarter of the capacity (2), however long they hang.
	stalled := make([]uuid.UUID, 10)
	var probes []*gatePass
	for i := range stalled {
		stalled[i] = uuid.New()
		if p, _, _ := g.admit(stalled[i]); p != nil {
			probes = append(probes, p)
		}
	}
	require.Len(t, probes, 2)
	now = now.Add(time.Minute)
	for _, s := range stalled {
		require.False(t, admit(s), "still probing or waiting for a probe place")
	}
	// The probes time out: those endpoints are slow now, and slow ones share half the capacity (4).
	for _, p := range probes {
		g.release(p)
	}
	slow := 0
	for range 3 {
		for _, s := range stalled[:2] {
			if admit(s) {
				slow++
			}
		}
	}
	require.Equal(t, 4, slow, "two per slow endpoint, four in all")
	for _, s := range stalled[2:4] {
		require.True(t, admit(s), "probe places are free again")
	}
	require.Equal(t, 4, g.inFlightOf(classSlow, now))
	require.Equal(t, 2, g.probes())

	// Six of eight handlers hang; the fast endpoint still gets its own cap.
	for range 3 {
		require.True(t, admit(fast))
	}
	require.False(t, admit(fast))
	// A send of it that runs past slowSendAfter makes it slow, and the slow half is full.
	now = now.Add(slowSendAfter + time.Millisecond)
	require.False(t, admit(fast))
}
