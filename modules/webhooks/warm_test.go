package webhooks

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWarmGoroutinesStartEveryFunctionAtOnceEvenWhileTheOthersBlock(t *testing.T) {
	w := newWarmGoroutines(time.Minute)
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(50)
	for range 50 {
		w.Go(func() { started.Done(); <-release })
	}
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("a function waited for another to end")
	}
	close(release)
}

func TestWarmGoroutinesRunEveryFunctionOnceWhenReused(t *testing.T) {
	w := newWarmGoroutines(time.Minute)
	var ran atomic.Int64
	var done sync.WaitGroup
	for range 20 { // rounds: the goroutines of one round are idle for the next
		for range 25 {
			done.Add(1)
			w.Go(func() { ran.Add(1); done.Done() })
		}
		done.Wait()
	}
	require.Equal(t, int64(500), ran.Load())
}
