package messaging

import (
	"context"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
)

// copyLocks lets one copy of a message at a time through a consumer in this replica. Delivery is
// at least once, so two copies of one event (a forward repeated after a crash, a requeue) may sit
// side by side in a queue; with Concurrency > 1 they would otherwise run at the same moment, both
// before either recorded its effect, and a handler that guards with a read (a claim check) would
// act twice. Handled one after the other, the second sees what the first did.
type copyLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the copy holding the id finishes
}

func newCopyLocks() *copyLocks { return &copyLocks{held: map[string]chan struct{}{}} }

// lock waits until no other copy of id is being handled, or ctx ends.
func (l *copyLocks) lock(ctx context.Context, id string) (unlock func(), err error) {
	for {
		l.mu.Lock()
		busy, ok := l.held[id]
		if !ok {
			done := make(chan struct{})
			l.held[id] = done
			l.mu.Unlock()
			return func() {
				l.mu.Lock()
				delete(l.held, id)
				l.mu.Unlock()
				close(done)
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// oneCopyAtATime is the outermost middleware of a consumer with Concurrency > 1. A copy waiting
// when the grace period ends fails, and the closing channel returns it to the queue.
func oneCopyAtATime(hard context.Context) message.HandlerMiddleware {
	locks := newCopyLocks()
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			if msg.UUID == "" {
				return h(msg)
			}
			unlock, err := locks.lock(hard, msg.UUID)
			if err != nil {
				return nil, err
			}
			defer unlock()
			return h(msg)
		}
	}
}
