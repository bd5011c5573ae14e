package messaging

import (
	"context"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// drainingSubscriber wraps the outbox subscriber so that closing a forwarder does not undo the
// forward in progress. watermill-sql's subscriber, when closed while a message it handed out is
// acked at the same moment, picks either outcome at random; on "closed" the row is kept and
// forwarded again by the next replica. Here Close first lets the in-flight forward settle, then
// nacks whatever comes next for a short window so the subscriber records the ack, and only then
// closes it.
type drainingSubscriber struct {
	inner  message.Subscriber
	window time.Duration

	closing   chan struct{}
	closeOnce sync.Once
	pumps     sync.WaitGroup
}

func newDrainingSubscriber(inner message.Subscriber, window time.Duration) *drainingSubscriber {
	return &drainingSubscriber{inner: inner, window: window, closing: make(chan struct{})}
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
	for {
		select {
		case <-s.closing:
			s.drain(in)
			return
		case msg, ok := <-in:
			if !ok {
				return
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
				s.drain(in)
				return
			}
		}
	}
}

// drain nacks what the inner subscriber offers during the window: receiving anything proves it
// has recorded the previous ack.
func (s *drainingSubscriber) drain(in <-chan *message.Message) {
	deadline := time.After(s.window)
	for {
		select {
		case msg, ok := <-in:
			if !ok {
				return
			}
			msg.Nack()
		case <-deadline:
			return
		}
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
