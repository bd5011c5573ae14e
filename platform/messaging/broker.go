package messaging

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

var errBrokerClosed = errors.New("broker connection closed")

// broker is one AMQP connection, redialled on demand after it drops. watermill-amqp's own connection
// wrapper is not used: it reassigns its state without a lock on reconnect (watermill#693), a data
// race that fires under -race at every broker blip. With several URLs (the nodes of a cluster) a
// dial starts at the node that answered last and tries each in turn, so a replica fails over when
// its node goes away.
type broker struct {
	urls []string
	name string
	next int // index of the URL the next dial tries first

	mu     sync.Mutex
	conn   *amqp.Connection
	closed bool
}

func newBroker(url, name string) *broker { return &broker{urls: brokerURLs(url), name: name} }

// connection returns the open connection, dialling one when there is none.
func (b *broker) connection(ctx context.Context) (*amqp.Connection, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errBrokerClosed
	}
	if b.conn != nil && !b.conn.IsClosed() {
		return b.conn, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(b.name)
	var errs []error
	for i := range b.urls {
		n := (b.next + i) % len(b.urls)
		conn, err := amqp.DialConfig(b.urls[n], amqp.Config{
			Heartbeat:  10 * time.Second,
			Locale:     "en_US",
			Properties: props,
			Dial:       dialer(ctx),
		})
		if err == nil {
			b.conn, b.next = conn, n
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	// The node that failed last is not the first one tried next time.
	b.next = (b.next + 1) % len(b.urls)
	return nil, fmt.Errorf("dial RabbitMQ: %w", errors.Join(errs...))
}

// dialer bounds the TCP dial and the AMQP handshake by 5 s and by ctx.
func dialer(ctx context.Context) func(network, addr string) (net.Conn, error) {
	return func(network, addr string) (net.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var d net.Dialer
		conn, err := d.DialContext(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return conn, nil
	}
}

// ping opens and closes a channel: proof that the broker answers now.
func (b *broker) ping(ctx context.Context) error {
	conn, err := b.connection(ctx)
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("RabbitMQ channel: %w", err)
	}
	return ch.Close()
}

func (b *broker) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.conn == nil || b.conn.IsClosed() {
		return nil
	}
	return b.conn.Close()
}
