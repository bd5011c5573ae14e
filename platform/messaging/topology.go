package messaging

import (
	"context"
	"fmt"
)

// declareTopology declares the exchange, every consumer queue with its bindings, and every
// dead-letter queue. It must finish before anything is forwarded: RabbitMQ drops a message that no
// queue is bound for, without an error and even with publisher confirms.
func declareTopology(ctx context.Context, b *broker, cfg Config, subs []Subscription) error {
	conn, err := b.connection(ctx)
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer func() { _ = ch.Close() }()

	if err := ch.ExchangeDeclare(cfg.Exchange, "topic", true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", cfg.Exchange, err)
	}
	for _, s := range subs {
		queue := cfg.queueName(s.Consumer)
		if _, err := ch.QueueDeclare(queue, true, false, false, false, cfg.queueArgs()); err != nil {
			return fmt.Errorf("declare queue %s: %w", queue, err)
		}
		for _, eventType := range s.EventTypes {
			if err := ch.QueueBind(queue, eventType, cfg.Exchange, false, nil); err != nil {
				return fmt.Errorf("bind %s to %s: %w", queue, eventType, err)
			}
		}
		dead := cfg.deadQueueName(s.Consumer)
		if _, err := ch.QueueDeclare(dead, true, false, false, false, cfg.queueArgs()); err != nil {
			return fmt.Errorf("declare queue %s: %w", dead, err)
		}
	}
	return nil
}
