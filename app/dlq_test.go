package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/messaging"
)

func TestDLQListShowsDeadLettersAndReplayMovesThemBackWithoutTheirDeadLetterHeaders(t *testing.T) {
	d := dbtest.Create(t)
	bus := hosttest.Broker()
	t.Setenv("DATABASE_URL", d.URL)
	t.Setenv("AMQP_URL", bus.AMQPURL)
	t.Setenv("AMQP_EXCHANGE", bus.Exchange)
	t.Setenv("AMQP_QUEUE_PREFIX", bus.QueuePrefix)
	t.Setenv("LOG_LEVEL", "error")
	const consumer = "webhooks.delivery"
	queue, dead := bus.QueuePrefix+"."+consumer, bus.QueuePrefix+"."+consumer+".dead"

	conn, err := amqp.Dial(bus.AMQPURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	t.Cleanup(func() { hosttest.DeleteTopology(bus, []string{consumer}) })
	for _, q := range []string{queue, dead} {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil)
		require.NoError(t, err)
	}
	for i := range 3 {
		require.NoError(t, ch.PublishWithContext(t.Context(), "", dead, true, false, amqp.Publishing{
			MessageId: "m" + string(rune('1'+i)), Body: []byte(`{"n":1}`), DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{messaging.HeaderDeadReason: "handler exploded", messaging.HeaderDeadConsumer: consumer,
				messaging.HeaderDeadAt: time.Now().UTC().Format(time.RFC3339), "event_type": "webhooks.delivery_requested"},
		}))
	}
	depth := func(q string) int {
		c, err := conn.Channel()
		require.NoError(t, err)
		defer c.Close()
		st, err := c.QueueDeclarePassive(q, true, false, false, false, nil)
		require.NoError(t, err)
		return st.Messages
	}
	hosttest.Eventually(t, 30*time.Second, func() bool { return depth(dead) == 3 }, "3 dead letters")

	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"dlq", "list"}, &out))
	line := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, consumer+" ") {
			line = l
		}
	}
	assert.Equal(t, []string{consumer, dead, "3"}, strings.Fields(line), out.String())
	assert.Contains(t, out.String(), "webhooks.fanout", "every consumer is listed, with 0 where nothing is dead")

	out.Reset()
	require.NoError(t, run(context.Background(), []string{"dlq", "replay", dead, "--limit", "2"}, &out))
	assert.Contains(t, out.String(), "replayed 2 message(s)")
	hosttest.Eventually(t, 30*time.Second, func() bool { return depth(queue) == 2 && depth(dead) == 1 }, "2 moved, 1 left")

	out.Reset()
	require.NoError(t, run(context.Background(), []string{"dlq", "replay", consumer}, &out))
	assert.Contains(t, out.String(), "replayed 1 message(s)")
	hosttest.Eventually(t, 30*time.Second, func() bool { return depth(queue) == 3 && depth(dead) == 0 }, "all moved")

	got, ok, err := ch.Get(queue, true)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "m1", got.MessageId, "oldest first")
	assert.Equal(t, []byte(`{"n":1}`), got.Body)
	assert.Equal(t, "webhooks.delivery_requested", got.Headers["event_type"])
	assert.NotContains(t, got.Headers, messaging.HeaderDeadReason)

	require.ErrorIs(t, run(context.Background(), []string{"dlq", "replay"}, &out), errUsage)
	require.ErrorContains(t, run(context.Background(), []string{"dlq", "replay", "nobody"}, &out), "no consumer")
}
