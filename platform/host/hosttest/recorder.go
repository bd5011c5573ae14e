package hosttest

import (
	"context"
	"io/fs"
	"sync"

	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
)

// Recorder is a module consuming every event: the test's view of what left the outbox.
// Pass the same Recorder to every replica of a test; redeliveries are recorded once, by event id.
// The zero value is ready to use.
type Recorder struct {
	mu     sync.Mutex
	events []messaging.Event
	seen   map[string]bool
}

// Name is the recorder's module and consumer name.
func (r *Recorder) Name() string { return "test_recorder" }

// Migrations returns nil: the recorder keeps its events in memory.
func (r *Recorder) Migrations() fs.FS { return nil }

// Register subscribes to every event type.
func (r *Recorder) Register(reg *module.Registry) error {
	reg.Subscribe(messaging.Subscription{Consumer: r.Name(), EventTypes: []string{"#"}, Handle: r.record})
	return nil
}

func (r *Recorder) record(_ context.Context, e messaging.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if !r.seen[e.ID] {
		r.seen[e.ID] = true
		r.events = append(r.events, e)
	}
	return nil
}

// OfType returns the recorded events of one type, in arrival order.
func (r *Recorder) OfType(eventType string) []messaging.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []messaging.Event
	for _, e := range r.events {
		if e.Type == eventType {
			out = append(out, e)
		}
	}
	return out
}

var _ module.Module = (*Recorder)(nil)
