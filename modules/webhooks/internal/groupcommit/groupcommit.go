// Package groupcommit turns the requests of concurrent handlers into batched writes: a request that
// arrives while a batch is being written joins the next one, which starts as soon as the previous
// ends. The delivery engine's takes, outcomes and ingests go through it, so hundreds of concurrent
// sends cost a few statements, not hundreds. It is the one place where work changes goroutine: a
// batch runs on its own and, when traced, its span links to the span of every caller it served.
package groupcommit

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// WriteTimeout bounds one batched statement; the handlers waiting for it give up with their own contexts.
const WriteTimeout = 10 * time.Second

// Batcher turns the requests of concurrent handlers into batched writes (group commit): a request
// that arrives while a batch is being written joins the next one, which starts as soon as the
// previous ends. There is no timer: a lone request is written at once, a burst shares one statement.
// Each caller waits for its own result, so what a handler acknowledges is committed.
type Batcher[Req, Res any] struct {
	max   int
	write func(ctx context.Context, reqs []Req) ([]Res, error) // one result per request, in order
	// Split, if set, gives each batch a fresh test of whether a request must wait for the next batch
	// (it must not share this one with an earlier request).
	Split func() (later func(Req) bool)
	// tracer, if set, records each batch as a span named name (see Traced).
	tracer trace.Tracer
	name   string

	mu      sync.Mutex
	queue   []batchCall[Req, Res]
	running bool
}

type batchCall[Req, Res any] struct {
	req  Req
	from trace.SpanContext // the caller's span, linked from the batch's; zero when not traced
	done chan batchResult[Res]
}

type batchResult[Res any] struct {
	res Res
	err error
}

// New batches up to max requests per call of write.
func New[Req, Res any](max int, write func(context.Context, []Req) ([]Res, error)) *Batcher[Req, Res] {
	return &Batcher[Req, Res]{max: max, write: write}
}

// Do queues req and waits for its result, or for ctx: a request already in a batch may still be
// written after its caller gave up (what a dying replica's writes look like to the others).
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	call := batchCall[Req, Res]{req: req, done: make(chan batchResult[Res], 1)}
	if b.tracer != nil {
		call.from = trace.SpanContextFromContext(ctx)
	}
	b.mu.Lock()
	b.queue = append(b.queue, call)
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case r := <-call.done:
		return r.res, r.err
	case <-ctx.Done():
		var zero Res
		return zero, ctx.Err()
	}
}

// run writes batches until the queue is empty; then it ends, and the next request starts another.
func (b *Batcher[Req, Res]) run() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		n := min(len(b.queue), b.max)
		calls := append([]batchCall[Req, Res](nil), b.queue[:n]...)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		if b.Split != nil {
			later := b.Split()
			kept, deferred := calls[:0], []batchCall[Req, Res](nil) // calls is this batch's own copy: filtered in place
			for _, c := range calls {
				if later(c.req) {
					deferred = append(deferred, c)
				} else {
					kept = append(kept, c)
				}
			}
			if deferred != nil {
				b.queue = append(deferred, b.queue...)
			}
			calls = kept
		}
		b.mu.Unlock()
		b.flush(calls)
	}
}

func (b *Batcher[Req, Res]) flush(calls []batchCall[Req, Res]) {
	reqs := make([]Req, len(calls))
	for i, c := range calls {
		reqs[i] = c.req
	}
	ctx, cancel := context.WithTimeout(context.Background(), WriteTimeout)
	var span trace.Span
	if b.tracer != nil {
		ctx, span = b.startSpan(ctx, calls)
	}
	res, err := b.write(ctx, reqs)
	if span != nil {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "batch not written")
		}
		span.End()
	}
	cancel()
	for i, c := range calls {
		r := batchResult[Res]{err: err}
		if err == nil {
			r.res = res[i]
		}
		c.done <- r
	}
}

// Traced records each batch as a span named name; call it before use. Without it a batch costs no span.
func (b *Batcher[Req, Res]) Traced(tracer trace.Tracer, name string) {
	b.tracer, b.name = tracer, name
}

// startSpan starts a batch's span: a root of its own, as one batch serves many traces, linked to
// the span of each request's caller, so every delivery's trace leads to the statement that wrote it
// (and the statement's own spans, a unit of work, nest under it).
func (b *Batcher[Req, Res]) startSpan(ctx context.Context, calls []batchCall[Req, Res]) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, len(calls))
	for _, c := range calls {
		if c.from.IsValid() {
			links = append(links, trace.Link{SpanContext: c.from})
		}
	}
	return b.tracer.Start(ctx, b.name, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("keelson.webhook.batch_size", len(calls))))
}

// OncePer returns a split that keeps the first request of each key in a batch and defers the others
// to the next, which then sees what the first one wrote.
func OncePer[Req any, K comparable](key func(Req) K) func() func(Req) bool {
	return func() func(Req) bool {
		seen := make(map[K]bool)
		return func(r Req) bool {
			k := key(r)
			if seen[k] {
				return true
			}
			seen[k] = true
			return false
		}
	}
}

// State is what the batcher holds right now: requests waiting for a batch, and whether one is being written.
func (b *Batcher[Req, Res]) State() (queued int, running bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue), b.running
}
