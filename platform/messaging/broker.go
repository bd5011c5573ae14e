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
// race that fires under -race at every broker blip.
type broker struct {
	url  string
	name string

	mu     sync.Mutex
	conn   *amqp.Connection
	closed bool
}

func newBroker(url, name string) *broker { return &broker{url: url, name: name} }

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
	conn, err := amqp.DialConfig(b.url, amqp.Config{
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Properties: props,
		Dial:       dialer(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("dial RabbitMQ: %w", err)
	}
	b.conn = conn
	return conn, nil
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
