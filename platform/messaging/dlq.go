package messaging

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DeadLetterQueue is one consumer's dead-letter queue and how many messages wait in it.
type DeadLetterQueue struct {
	Consumer string
	Queue    string // where a replay sends its messages
	Dead     string
	Messages int
}

// ListDeadLetters reports the dead-letter queue of every consumer, declared or not (a queue not yet
// declared holds nothing and is reported with 0).
func ListDeadLetters(ctx context.Context, cfg Config, consumers []string) ([]DeadLetterQueue, error) {
	cfg = cfg.withDefaults()
	b := newBroker(cfg.AMQPURL, "keelson dlq")
	defer func() { _ = b.close() }()
	conn, err := b.connection(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetterQueue, 0, len(consumers))
	for _, c := range consumers {
		q := DeadLetterQueue{Consumer: c, Queue: cfg.queueName(c), Dead: cfg.deadQueueName(c)}
		// A passive declare on a missing queue closes the channel, so each queue gets its own.
		ch, err := conn.Channel()
		if err != nil {
			return nil, fmt.Errorf("RabbitMQ channel: %w", err)
		}
		state, err := ch.QueueDeclarePassive(q.Dead, true, false, false, false, nil)
		var amqpErr *amqp.Error
		switch {
		case err == nil:
			q.Messages = state.Messages
			_ = ch.Close()
		case errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound:
		default:
			return nil, fmt.Errorf("inspect %s: %w", q.Dead, err)
		}
		out = append(out, q)
	}
	return out, nil
}

// ReplayDeadLetters moves up to limit messages (0 = all waiting now) from consumer's dead-letter queue
// back to its queue, oldest first: each is republished with its id, payload and metadata (less the
// dead-letter headers) and acknowledged in the dead-letter queue only once RabbitMQ confirmed the copy,
// so a crash in between leaves a duplicate, never a loss; the consumer's inbox drops duplicates.
func ReplayDeadLetters(ctx context.Context, cfg Config, consumer string, limit int) (int, error) {
	cfg = cfg.withDefaults()
	b := newBroker(cfg.AMQPURL, "keelson dlq")
	defer func() { _ = b.close() }()
	conn, err := b.connection(ctx)
	if err != nil {
		return 0, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("RabbitMQ channel: %w", err)
	}
	defer func() { _ = ch.Close() }()
	if err := ch.Confirm(false); err != nil {
		return 0, fmt.Errorf("publisher confirms: %w", err)
	}
	queue, dead := cfg.queueName(consumer), cfg.deadQueueName(consumer)
	if _, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil); err != nil {
		return 0, fmt.Errorf("queue %s: %w", queue, err)
	}
	state, err := ch.QueueDeclarePassive(dead, true, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("dead-letter queue %s: %w", dead, err)
	}
	// Only what waits now: a message dead-lettered again during the replay is not replayed twice.
	todo := state.Messages
	if limit > 0 {
		todo = min(todo, limit)
	}
	moved := 0
	for moved < todo {
		if err := ctx.Err(); err != nil {
			return moved, err
		}
		d, ok, err := ch.Get(dead, false)
		if err != nil {
			return moved, fmt.Errorf("get from %s: %w", dead, err)
		}
		if !ok {
			break
		}
		headers := amqp.Table{}
		for k, v := range d.Headers {
			if k != HeaderDeadReason && k != HeaderDeadConsumer && k != HeaderDeadAt {
				headers[k] = v
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		confirm, err := ch.PublishWithDeferredConfirmWithContext(pctx, "", queue, true, false, amqp.Publishing{
			Headers: headers, ContentType: d.ContentType, DeliveryMode: amqp.Persistent,
			MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type, Body: d.Body,
		})
		if err == nil {
			var acked bool
			acked, err = confirm.WaitContext(pctx)
			if err == nil && !acked {
				err = errors.New("RabbitMQ refused the copy")
			}
		}
		cancel()
		if err != nil {
			_ = d.Nack(false, true)
			return moved, fmt.Errorf("republish to %s: %w", queue, err)
		}
		if err := d.Ack(false); err != nil {
			return moved, fmt.Errorf("ack in %s: %w", dead, err)
		}
		moved++
	}
	return moved, nil
}
