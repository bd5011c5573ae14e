package messaging

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/trace"
)

// Config tunes the bus. Zero values take the defaults below; app uses the defaults and sets only
// AMQPURL. Tests set a unique Exchange and QueuePrefix so runs do not see each other's messages.
type Config struct {
	// AMQPURL is the RabbitMQ URL (required); several comma-separated URLs name the nodes of one
	// cluster, tried in turn when a connection drops or cannot be made.
	AMQPURL string
	// QueueType is "classic" (default) or "quorum": the type consumer and dead-letter queues are
	// declared with. A queue keeps the type it was first declared with; see docs/operations.md.
	QueueType string
	// Exchange is the durable topic exchange every event is published to. Default "keelson.events".
	Exchange string
	// QueuePrefix names consumer queues "<prefix>.<consumer>" and their dead-letter queues
	// "<prefix>.<consumer>.dead". Default "keelson".
	QueuePrefix string
	// PollInterval is how often an idle forwarder looks for outbox rows written by other processes:
	// a commit through the publisher given its relay wakes it at once, so only those rows (a stopped
	// replica's, a command's) wait for it. Default 250ms: every idle poll is a transaction, and at
	// 20 ms they took 13 % of a replica's CPU in a delivery burst.
	PollInterval time.Duration
	// Forwarders is the number of outbox forwarders per process. They take disjoint rows, so they
	// forward in parallel, and each polls every PollInterval when idle. Default 2.
	Forwarders int
	// ForwardBatchSize is how many outbox rows one forwarder poll takes. Default 100.
	ForwardBatchSize int
	// PublishTimeout bounds one publish plus its broker confirm. Default 10s.
	PublishTimeout time.Duration
	// MaxRetries is how many times a failing handler is retried before its message is dead-lettered.
	// Default 5 (6 attempts); negative means no retry.
	MaxRetries int
	// RetryInitialInterval and RetryMaxInterval bound the exponential backoff between attempts.
	// Defaults 100ms and 5s.
	RetryInitialInterval time.Duration
	RetryMaxInterval     time.Duration
	// BacklogInterval is how often the outbox backlog gauge is sampled. Default 5s.
	BacklogInterval time.Duration
	// ShutdownTimeout bounds the graceful stop of in-flight handlers and forwards. Default 20s.
	ShutdownTimeout time.Duration
	// ForwardOnly runs the forwarder and declares every consumer's queue, but consumes nothing.
	ForwardOnly bool
	// TracerProvider records a consumer span per handled message, child of the span that
	// published the event; nil records none (the trace context still reaches the handler).
	TracerProvider trace.TracerProvider
}

// Defaults of Config.
const (
	DefaultExchange    = "keelson.events"
	DefaultQueuePrefix = "keelson"
	QueueTypeClassic   = "classic"
	QueueTypeQuorum    = "quorum"
)

var (
	namePattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$`)
	bindingPattern  = regexp.MustCompile(`^[A-Za-z0-9_*#-]+(\.[A-Za-z0-9_*#-]+)*$`)
	consumerPattern = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,80}$`)
)

func (c Config) withDefaults() Config {
	if c.Exchange == "" {
		c.Exchange = DefaultExchange
	}
	if c.QueuePrefix == "" {
		c.QueuePrefix = DefaultQueuePrefix
	}
	if c.QueueType == "" {
		c.QueueType = QueueTypeClassic
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 250 * time.Millisecond
	}
	if c.Forwarders <= 0 {
		c.Forwarders = 2
	}
	if c.ForwardBatchSize <= 0 {
		c.ForwardBatchSize = 100
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = 10 * time.Second
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	} else if c.MaxRetries == 0 {
		c.MaxRetries = 5
	}
	if c.RetryInitialInterval <= 0 {
		c.RetryInitialInterval = 100 * time.Millisecond
	}
	if c.RetryMaxInterval <= 0 {
		c.RetryMaxInterval = 5 * time.Second
	}
	if c.BacklogInterval <= 0 {
		c.BacklogInterval = 5 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 20 * time.Second
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if len(brokerURLs(c.AMQPURL)) == 0 {
		errs = append(errs, errors.New("empty AMQPURL"))
	}
	if c.QueueType != QueueTypeClassic && c.QueueType != QueueTypeQuorum {
		errs = append(errs, fmt.Errorf("queue type %q is neither classic nor quorum", c.QueueType))
	}
	if !namePattern.MatchString(c.Exchange) {
		errs = append(errs, fmt.Errorf("invalid exchange name %q", c.Exchange))
	}
	if !namePattern.MatchString(c.QueuePrefix) {
		errs = append(errs, fmt.Errorf("invalid queue prefix %q", c.QueuePrefix))
	}
	if c.Forwarders > 64 {
		errs = append(errs, fmt.Errorf("forwarders %d > 64", c.Forwarders))
	}
	return errors.Join(errs...)
}

func validateSubscriptions(subs []Subscription) error {
	seen := map[string]bool{}
	var errs []error
	for _, s := range subs {
		switch {
		case !consumerPattern.MatchString(s.Consumer):
			errs = append(errs, fmt.Errorf("subscription: invalid consumer name %q", s.Consumer))
		case seen[s.Consumer]:
			errs = append(errs, fmt.Errorf("subscription: consumer %q registered twice", s.Consumer))
		case s.Handle == nil:
			errs = append(errs, fmt.Errorf("subscription %s: nil handler", s.Consumer))
		case len(s.EventTypes) == 0:
			errs = append(errs, fmt.Errorf("subscription %s: no event types", s.Consumer))
		case s.Concurrency < 0 || s.Concurrency > MaxConcurrency:
			errs = append(errs, fmt.Errorf("subscription %s: concurrency %d not in 0..%d", s.Consumer, s.Concurrency, MaxConcurrency))
		}
		seen[s.Consumer] = true
		for _, t := range s.EventTypes {
			if !bindingPattern.MatchString(t) {
				errs = append(errs, fmt.Errorf("subscription %s: invalid event type %q", s.Consumer, t))
			}
		}
	}
	return errors.Join(errs...)
}

// MaxConcurrency bounds Subscription.Concurrency: each handler slot holds one unacked message, and
// the prefetch of a consumer channel grows with it.
const MaxConcurrency = 256

// concurrency is the number of messages of s one replica handles at once.
func (s Subscription) concurrency() int { return max(s.Concurrency, 1) }

// queueArgs are the arguments every queue is declared with. A quorum queue's members are the cluster's
// nodes at declaration time; its confirms wait for a majority of them.
func (c Config) queueArgs() amqp.Table {
	if c.QueueType == QueueTypeQuorum {
		return amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}
	}
	return nil
}

// brokerURLs splits a comma-separated AMQPURL into the URLs of a cluster's nodes.
func brokerURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// queueName is the durable queue all replicas of one consumer compete on.
func (c Config) queueName(consumer string) string { return c.QueuePrefix + "." + consumer }

// deadQueueName is where a consumer's poison messages end up.
func (c Config) deadQueueName(consumer string) string { return c.queueName(consumer) + ".dead" }
