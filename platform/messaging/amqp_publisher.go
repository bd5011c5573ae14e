package messaging

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
)

// confirmPublisher is a watermill publisher to one exchange with publisher confirms: Publish
// returns nil only once RabbitMQ has taken responsibility for every message.
type confirmPublisher struct {
	broker    *broker
	exchange  string
	timeout   time.Duration
	confirmed func(*message.Message) // called once a message is confirmed (and, if gated, committed)

	mu     sync.Mutex
	idle   []*amqp.Channel
	closed bool
}

// maxIdleChannels is above the most forwarders a bus runs: closing a channel would fail the
// confirms still pending on it.
const maxIdleChannels = 80

func newConfirmPublisher(b *broker, exchange string, timeout time.Duration, confirmed func(*message.Message)) *confirmPublisher {
	return &confirmPublisher{broker: b, exchange: exchange, timeout: timeout, confirmed: confirmed}
}

// Publish sends msgs with topic as routing key and waits for all their confirms, except for
// messages carrying a ConfirmGate (the relay's transaction), whose Commit awaits their confirms.
func (p *confirmPublisher) Publish(topic string, msgs ...*message.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(msgs[0].Context(), p.timeout)
	defer cancel()
	ch, err := p.channel(ctx)
	if err != nil {
		return err
	}
	ok := false
	defer func() { p.release(ch, ok) }()

	confirms := make([]*amqp.DeferredConfirmation, 0, len(msgs))
	waited := make([]*message.Message, 0, len(msgs))
	for _, msg := range msgs {
		pub, err := wireFormat.Marshal(msg)
		if err != nil {
			return fmt.Errorf("marshal message %s: %w", msg.UUID, err)
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, topic, false, false, pub)
		if err != nil {
			return fmt.Errorf("publish %s to %q: %w", msg.UUID, topic, err)
		}
		if gate, gated := confirmGateOf(msg.Context()); gated {
			gate.Await(dc, msg, p.confirmed)
			continue
		}
		confirms = append(confirms, dc)
		waited = append(waited, msg)
	}
	for i, dc := range confirms {
		acked, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("confirm of %s: %w", waited[i].UUID, err)
		}
		if !acked {
			return fmt.Errorf("RabbitMQ did not confirm message %s", waited[i].UUID)
		}
	}
	ok = true
	if p.confirmed != nil {
		for _, msg := range waited {
			p.confirmed(msg)
		}
	}
	return nil
}

// channel takes an idle confirm-mode channel, or opens one on the current connection.
func (p *confirmPublisher) channel(ctx context.Context) (*amqp.Channel, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("publisher closed")
	}
	for len(p.idle) > 0 {
		ch := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !ch.IsClosed() {
			p.mu.Unlock()
			return ch, nil
		}
	}
	p.mu.Unlock()

	conn, err := p.broker.connection(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	return ch, nil
}

// release keeps a healthy channel for the next publish; a channel that saw an error is closed,
// because a late confirm on it would be attributed to the wrong message.
func (p *confirmPublisher) release(ch *amqp.Channel, healthy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if healthy && !p.closed && !ch.IsClosed() && len(p.idle) < maxIdleChannels {
		p.idle = append(p.idle, ch)
		return
	}
	_ = ch.Close()
}

// Close closes the idle channels; publishes still running finish on theirs.
func (p *confirmPublisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, ch := range p.idle {
		_ = ch.Close()
	}
	p.idle = nil
	return nil
}
