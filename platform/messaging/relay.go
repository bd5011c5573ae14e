package messaging

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Relay moves the events modules committed (platform/outbox) to RabbitMQ. The Bus runs its
// forwarders once the topology is declared, beside the consumers, and stops them with them; the
// Bus owns the broker side, the relay owns where events wait.
type Relay interface {
	// Forwarders returns the relay's forwarders, publishing through o.Out.
	Forwarders(o ForwardOptions) ([]Forwarder, error)
	// Backlog counts the events not yet confirmed by RabbitMQ, for the backlog gauge.
	Backlog(ctx context.Context) (int64, error)
}

// ForwardOptions are what the Bus gives a relay's forwarders.
type ForwardOptions struct {
	// Out publishes to the events exchange with broker confirms. A message whose context carries a
	// ConfirmGate (WithConfirmGate) is handed to it instead of waited for.
	Out            message.Publisher
	Logger         watermill.LoggerAdapter
	Count          int           // Config.Forwarders
	BatchSize      int           // Config.ForwardBatchSize
	PollInterval   time.Duration // Config.PollInterval
	PublishTimeout time.Duration // Config.PublishTimeout
	CloseTimeout   time.Duration // Config.ShutdownTimeout
}

// Forwarder is one running component of a relay.
type Forwarder interface {
	Run(ctx context.Context) error
	// Running is closed once Run is forwarding.
	Running() chan struct{}
	// Close stops Run gracefully: a forward in flight completes.
	Close() error
}

// ConfirmGate collects the broker confirms of messages published inside one relay transaction, so
// that the transaction awaits them all at once when it commits instead of one fsync per message.
type ConfirmGate interface {
	// Await registers a published message's pending confirm; confirmed runs once it is confirmed
	// and the gate's transaction committed (nil: nothing to run).
	Await(confirm *amqp.DeferredConfirmation, msg *message.Message, confirmed func(*message.Message))
}

type confirmGateKey struct{}

// WithConfirmGate marks the messages published with ctx as gated by g.
func WithConfirmGate(ctx context.Context, g ConfirmGate) context.Context {
	return context.WithValue(ctx, confirmGateKey{}, g)
}

func confirmGateOf(ctx context.Context) (ConfirmGate, bool) {
	g, ok := ctx.Value(confirmGateKey{}).(ConfirmGate)
	return g, ok
}
