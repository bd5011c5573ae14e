package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
)

// prefetch is how many unacked deliveries one consumer channel may hold; handlers still run one
// message at a time per consumer and replica.
const prefetch = 4

// queueSubscriber is a watermill subscriber whose topic is a queue name. It hands one message at a
// time to the router, acks on Ack, requeues on Nack, and reconnects after the broker drops.
type queueSubscriber struct {
	broker *broker
	logger *slog.Logger
	grace  time.Duration

	// stopping is cancelled when Close starts: no new deliveries, and retries stop waiting.
	stopping context.Context
	stop     context.CancelFunc
	// hard is cancelled when the grace period is over: in-flight handlers are abandoned and their
	// unacked messages return to the queue when the channel closes.
	hard     context.Context
	hardStop context.CancelFunc

	wg        sync.WaitGroup
	closeOnce sync.Once
}

func newQueueSubscriber(b *broker, logger *slog.Logger, grace time.Duration) *queueSubscriber {
	stopping, stop := context.WithCancel(context.Background())
	hard, hardStop := context.WithCancel(context.Background())
	return &queueSubscriber{broker: b, logger: logger, grace: grace, stopping: stopping, stop: stop, hard: hard, hardStop: hardStop}
}

// Subscribe consumes queue until Close. ctx is not used to stop: the router cancels it as soon as
// it starts closing, while in-flight messages must still be acked.
func (s *queueSubscriber) Subscribe(_ context.Context, queue string) (<-chan *message.Message, error) {
	if s.stopping.Err() != nil {
		return nil, errors.New("subscriber closed")
	}
	out := make(chan *message.Message)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		backoff := 100 * time.Millisecond
		for s.stopping.Err() == nil {
			delivered, err := s.consume(queue, out)
			if s.stopping.Err() != nil {
				return
			}
			if delivered {
				backoff = 100 * time.Millisecond
			}
			s.logger.Warn("consumer disconnected, reconnecting", "queue", queue, "error", err, "wait", backoff)
			select {
			case <-s.stopping.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}()
	return out, nil
}

// consume runs one channel until it fails or the subscriber stops.
func (s *queueSubscriber) consume(queue string, out chan<- *message.Message) (delivered bool, err error) {
	conn, err := s.broker.connection(s.stopping)
	if err != nil {
		return false, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("open channel: %w", err)
	}
	defer func() { _ = ch.Close() }()
	// A few deliveries in advance hide the broker round trip; they return to the queue on close.
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return false, fmt.Errorf("qos: %w", err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("consume %s: %w", queue, err)
	}
	for {
		select {
		case <-s.stopping.Done():
			return delivered, nil
		case d, ok := <-deliveries:
			if !ok {
				return delivered, errors.New("delivery channel closed")
			}
			delivered = true
			if err := s.deliver(d, out); err != nil {
				return delivered, err
			}
		}
	}
}

// deliver passes one message to the router and settles it with the broker.
func (s *queueSubscriber) deliver(d amqp.Delivery, out chan<- *message.Message) error {
	msg := unmarshalDelivery(d)
	msg.SetContext(s.stopping)
	select {
	case out <- msg:
	case <-s.stopping.Done():
		return d.Nack(false, true)
	}
	select {
	case <-msg.Acked():
		return d.Ack(false)
	case <-msg.Nacked():
		return d.Nack(false, true)
	case <-s.hard.Done():
		return nil // the deferred channel close requeues it
	}
}

// Close stops taking messages, lets in-flight ones settle for the grace period, then abandons them.
func (s *queueSubscriber) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(s.grace):
			s.hardStop()
			<-done
		}
		s.hardStop()
	})
	return nil
}
