package webhooks

import "time"

// warmGoroutines starts functions on goroutines that outlive them. A send's call chain (gate, take,
// signing, net/http) grows a new goroutine's stack several times, and copying those stacks took 6 % of a
// replica's CPU in a burst; a goroutine that finished one function waits keep for the next instead of
// exiting, so its grown stack serves again. Go never blocks and never queues: each function starts at
// once, on an idle goroutine or a new one, exactly as with a go statement.
type warmGoroutines struct {
	idle chan func() // unbuffered: a send succeeds only into a goroutine waiting for work
	keep time.Duration
}

func newWarmGoroutines(keep time.Duration) *warmGoroutines {
	return &warmGoroutines{idle: make(chan func()), keep: keep}
}

func (w *warmGoroutines) Go(fn func()) {
	select {
	case w.idle <- fn:
	default:
		go w.run(fn)
	}
}

func (w *warmGoroutines) run(fn func()) {
	t := time.NewTimer(w.keep)
	defer t.Stop()
	for {
		fn()
		t.Reset(w.keep)
		select {
		case fn = <-w.idle:
		case <-t.C:
			return
		}
	}
}
