package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rawConfirmRate is what RabbitMQ gives a publisher that waits for each confirm before the next
// message: the pattern of a forwarder that confirms one message at a time.
func rawConfirmRate(ctx context.Context, amqpURL string, publishers, n int) (float64, error) {
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	setup, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	// Durable and not exclusive, like a consumer queue: RabbitMQ fsyncs before confirming
	// (an exclusive queue would skip that and look ten times faster).
	q, err := setup.QueueDeclare("", true, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _, _ = setup.QueueDelete(q.Name, false, false, false) }()
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	start := time.Now()
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := conn.Channel()
			if err != nil {
				errs <- err
				return
			}
			defer ch.Close()
			if err := ch.Confirm(false); err != nil {
				errs <- err
				return
			}
			for range n / publishers {
				dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.Name, false, false,
					amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(`{"k":"v"}`)})
				if err != nil {
					errs <- err
					return
				}
				if ok, err := dc.WaitContext(ctx); err != nil || !ok {
					errs <- fmt.Errorf("confirm: %v %w", ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
