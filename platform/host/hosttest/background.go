package hosttest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/keelson/keelson/platform/messaging"
)

// Running is a function that Go runs in the background.
type Running struct {
	what   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	once   sync.Once
}

// Go runs run in a goroutine until Stop, which the end of the test calls at the latest. what names
// it in the failures Stop reports.
func Go(t testing.TB, what string, run func(ctx context.Context) error) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{what: what, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx)
	}()
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Done is closed once run has returned; Err is then what it returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Err is what run returned; it waits for run to return.
func (r *Running) Err() error {
	<-r.done
	return r.err
}

// Stop cancels run's context and waits up to 30 s for it to return; the test fails if run returns an
// error or does not return. Only the first call does anything.
func (r *Running) Stop(t testing.TB) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case <-r.done:
			if r.err != nil {
				t.Errorf("%s: %v", r.what, r.err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30s", r.what)
		}
	})
}

// RunBus runs bus until the test ends and returns once it is ready, failing the test if it stops
// first or is not ready within 30 s.
func RunBus(t testing.TB, bus *messaging.Bus) *Running {
	t.Helper()
	running := Go(t, "bus", bus.Run)
	select {
	case <-bus.Ready():
	case <-running.Done():
		t.Fatalf("bus stopped before ready: %v", running.Err())
	case <-time.After(30 * time.Second):
		t.Fatal("bus not ready after 30s")
	}
	return running
}
