package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelson/keelson/platform/correlation"
	"github.com/keelson/keelson/platform/telemetry"
	"github.com/keelson/keelson/platform/tenancy"
)

// Headers added to a message moved to a dead-letter queue.
const (
	HeaderDeadReason   = "dead_reason"
	HeaderDeadConsumer = "dead_consumer"
	HeaderDeadAt       = "dead_at"
)

// newConsumerRouter wires one router handler per subscription, handling up to its Concurrency
// messages at once (the router runs each in its own goroutine). Per message, outermost first:
// one copy of a message at a time (Concurrency > 1 only), dead-lettering, retry with exponential
// backoff, failure counting, panic recovery, the handler.
func newConsumerRouter(cfg Config, subs []Subscription, sub *queueSubscriber, dead message.Publisher,
	m *metrics, logger *slog.Logger, wlogger watermill.LoggerAdapter) (*message.Router, error) {
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: cfg.ShutdownTimeout + 5*time.Second}, wlogger)
	if err != nil {
		return nil, fmt.Errorf("consumer router: %w", err)
	}
	var tracer trace.Tracer
	if cfg.TracerProvider != nil {
		tracer = cfg.TracerProvider.Tracer("github.com/keelson/keelson/platform/messaging")
	}
	for _, s := range subs {
		h := router.AddConsumerHandler(s.Consumer, cfg.queueName(s.Consumer), sub.consumer(s.concurrency()), handlerFor(s, sub, tracer))
		if s.concurrency() > 1 {
			h.AddMiddleware(oneCopyAtATime(sub.hard))
		}
		h.AddMiddleware(
			deadLetter(s.Consumer, cfg.deadQueueName(s.Consumer), dead, m, logger),
			middleware.Retry{
				MaxRetries:      cfg.MaxRetries,
				InitialInterval: cfg.RetryInitialInterval,
				MaxInterval:     cfg.RetryMaxInterval,
				Multiplier:      2,
				ShouldRetry:     func(p middleware.RetryParams) bool { return !errors.Is(p.Err, errUndecodable) },
			}.Middleware,
			countFailures(s.Consumer, m),
			middleware.Recoverer,
		)
	}
	return router, nil
}

// handlerFor adapts a module's handler. Its context outlives the start of shutdown (the message's
// own context) so an in-flight handler can finish within the grace period.
func handlerFor(s Subscription, sub *queueSubscriber, tracer trace.Tracer) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		e, err := eventFromMessage(msg)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(sub.hard)
		defer cancel()
		ctx = tenancy.With(ctx, e.TenantID) // the handler acts for the event's tenant
		if e.CorrelationID != "" {
			ctx = correlation.With(ctx, e.CorrelationID)
		}
		ctx = telemetry.Extract(ctx, msg.Metadata)
		if tracer == nil {
			return s.Handle(ctx, e)
		}
		ctx, span := tracer.Start(ctx, s.Consumer+" process", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				attribute.String("messaging.system", "rabbitmq"),
				attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.consumer.group.name", s.Consumer),
				attribute.String("messaging.message.id", e.ID),
				attribute.String("keelson.event.type", e.Type),
			))
		defer span.End()
		if err := s.Handle(ctx, e); err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "handler failed")
			return err
		}
		return nil
	}
}

func countFailures(consumer string, m *metrics) message.HandlerMiddleware {
	failed := m.failed.WithLabelValues(consumer)
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err != nil {
				failed.Inc()
			}
			return out, err
		}
	}
}

// deadLetter moves a message whose attempts are exhausted to the consumer's dead-letter queue and
// acks it. A message that failed because the bus is stopping is nacked instead: back to its queue.
func deadLetter(consumer, deadQueue string, pub message.Publisher, m *metrics, logger *slog.Logger) message.HandlerMiddleware {
	handled := m.handled.WithLabelValues(consumer)
	deadLettered := m.deadLettered.WithLabelValues(consumer)
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err == nil {
				handled.Inc()
				return out, nil
			}
			if msg.Context().Err() != nil {
				return nil, err
			}
			dead := msg.Copy()
			dead.Metadata.Set(HeaderDeadReason, err.Error())
			dead.Metadata.Set(HeaderDeadConsumer, consumer)
			dead.Metadata.Set(HeaderDeadAt, time.Now().UTC().Format(time.RFC3339Nano))
			if perr := pub.Publish(deadQueue, dead); perr != nil {
				return nil, errors.Join(err, fmt.Errorf("dead-letter to %s: %w", deadQueue, perr))
			}
			deadLettered.Inc()
			logger.Error("message dead-lettered", "consumer", consumer, "queue", deadQueue,
				"message_id", msg.UUID, "event_type", msg.Metadata.Get(HeaderEventType), "error", err)
			return nil, nil
		}
	}
}
