package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
)

// prefetchAhead is how many deliveries a consumer channel holds beyond those being handled: they
// hide the broker round trip and return to the queue when the channel closes.
const prefetchAhead = 3

// queueSubscriber consumes queues for the router: per queue it hands up to a consumer's
// concurrency messages at once to the router, acks each on Ack, requeues it on Nack, and
// reconnects after the broker drops. Its consumer method gives the watermill subscriber of one queue.
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

// queueConsumer is the watermill subscriber of one consumer: its topic is the consumer's queue.
type queueConsumer struct {
	*queueSubscriber
	concurrency int
}

// consumer returns the subscriber that consumes a queue with concurrency messages in flight.
func (s *queueSubscriber) consumer(concurrency int) queueConsumer {
	return queueConsumer{queueSubscriber: s, concurrency: max(concurrency, 1)}
}

// Subscribe consumes queue until Close. ctx is not used to stop: the router cancels it as soon as
// it starts closing, while in-flight messages must still be acked.
func (c queueConsumer) Subscribe(_ context.Context, queue string) (<-chan *message.Message, error) {
	s := c.queueSubscriber
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
			delivered, err := s.consume(queue, c.concurrency, out)
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

// consume runs one channel until it fails or the subscriber stops. concurrency workers share it;
// each passes one delivery at a time to the router and settles it before taking the next, so at
// most concurrency handlers of this queue run at once. It returns once every worker has settled
// its delivery (or been abandoned at the end of the grace period).
func (s *queueSubscriber) consume(queue string, concurrency int, out chan<- *message.Message) (delivered bool, err error) {
	conn, err := s.broker.connection(s.stopping)
	if err != nil {
		return false, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("open channel: %w", err)
	}
	defer func() { _ = ch.Close() }()
	if err := ch.Qos(concurrency+prefetchAhead, 0, false); err != nil {
		return false, fmt.Errorf("qos: %w", err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("consume %s: %w", queue, err)
	}
	var (
		got     atomic.Bool
		workers sync.WaitGroup
		mu      sync.Mutex
		errs    []error
	)
	for range concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			if err := s.work(deliveries, out, &got); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				_ = ch.Close() // the other workers stop taking deliveries and settle what they hold
			}
		}()
	}
	workers.Wait()
	return got.Load(), errors.Join(errs...)
}

// work hands deliveries to the router one at a time until the channel fails or the subscriber stops.
func (s *queueSubscriber) work(deliveries <-chan amqp.Delivery, out chan<- *message.Message, delivered *atomic.Bool) error {
	for {
		select {
		case <-s.stopping.Done():
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("delivery channel closed")
			}
			delivered.Store(true)
			if err := s.deliver(d, out); err != nil {
				return err
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
