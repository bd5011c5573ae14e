package outbox

import (
	"context"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/keelson/keelson/platform/messaging"
)

// drainingSubscriber wraps the outbox subscriber so that closing a forwarder does not undo the
// forward in progress. watermill-sql's subscriber, when closed while a message it handed out is
// acked at the same moment, picks either outcome at random; on "closed" the row is kept and
// forwarded again by the next replica. Here Close first lets the in-flight forward settle, then
// waits until the subscriber has moved on: the transaction of the last forward has ended (its
// rows are deleted) or the next message is offered (nacked, so the acked ones are deleted when
// the subscriber closes). Only then is the subscriber closed.
type drainingSubscriber struct {
	inner   message.Subscriber
	timeout time.Duration

	closing   chan struct{}
	closeOnce sync.Once
	pumps     sync.WaitGroup
}

func newDrainingSubscriber(inner message.Subscriber, timeout time.Duration) *drainingSubscriber {
	return &drainingSubscriber{inner: inner, timeout: timeout, closing: make(chan struct{})}
}

func (s *drainingSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	// The router cancels ctx the moment it starts closing, which would roll back the outbox
	// transaction holding acked rows; the inner subscriber stops through Close instead.
	in, err := s.inner.Subscribe(context.WithoutCancel(ctx), topic)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	s.pumps.Add(1)
	go s.pump(in, out)
	return out, nil
}

func (s *drainingSubscriber) pump(in <-chan *message.Message, out chan<- *message.Message) {
	defer s.pumps.Done()
	defer close(out)
	var last *gatedTx // transaction of the last message handed out
	for {
		select {
		case <-s.closing:
			s.drain(in, last)
			return
		case msg, ok := <-in:
			if !ok {
				return
			}
			if gate, ok := gateOf(msg); ok {
				last = gate
				// The AMQP publisher hands the confirm to this transaction instead of waiting for it.
				msg.SetContext(messaging.WithConfirmGate(msg.Context(), gate))
			} else {
				last = nil
			}
			select {
			case out <- msg:
				// The inner subscriber waits for this settlement anyway; waiting here makes Close
				// wait for the forward in flight.
				select {
				case <-msg.Acked():
				case <-msg.Nacked():
				}
			case <-s.closing:
				msg.Nack()
				return
			}
		}
	}
}

// drain waits until the inner subscriber has recorded the last ack: the last forward's
// transaction has ended, or it offers the next message (nacked).
func (s *drainingSubscriber) drain(in <-chan *message.Message, last *gatedTx) {
	if last == nil {
		return
	}
	select {
	case <-last.done:
	case msg, ok := <-in:
		if ok {
			msg.Nack()
		}
	case <-time.After(s.timeout):
	}
}

func (s *drainingSubscriber) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closing)
		s.pumps.Wait()
		err = s.inner.Close()
	})
	return err
}
