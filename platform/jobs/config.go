package jobs

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Config tunes a Runner. Zero values take the defaults listed beside each field.
type Config struct {
	// InstanceID names this worker in claimed_by (hostname:pid). Required.
	InstanceID string
	// Workers is the number of jobs run at once by this replica. Default 16.
	Workers int
	// BatchSize caps the jobs claimed by one UPDATE. Default = Workers.
	BatchSize int
	// PollInterval is the wait between claims when the queue is empty, and the schedule re-check period. Default 1s.
	PollInterval time.Duration
	// Lease is how long a claim (job or schedule) holds without a heartbeat; a crashed worker's
	// work becomes claimable after it. Heartbeats extend it every Lease/4. Default 30s.
	Lease time.Duration
	// ShutdownTimeout bounds how long Run waits for in-flight work after its context ends;
	// what is still running then is released. Default 10s.
	ShutdownTimeout time.Duration
	// Retention is how long completed, failed and cancelled jobs are kept. Default 7 days.
	Retention time.Duration
	// PruneInterval is the period of the built-in prune schedule. Default 10m.
	PruneInterval time.Duration
	// RetryBase is the first retry delay; it doubles per attempt up to RetryMax, with jitter. Defaults 1s and 1h.
	RetryBase time.Duration
	RetryMax  time.Duration
	// CompleteBatch and CompleteFlush bound the completer: completions are written in one UPDATE
	// when CompleteBatch are waiting or CompleteFlush after the first one. Defaults 1000 and 2ms.
	CompleteBatch int
	CompleteFlush time.Duration
	// DepthInterval is how often the depth-by-status gauge is sampled. Default 15s; negative disables.
	DepthInterval time.Duration
	// DurableClaims makes claims and heartbeats commit with synchronous_commit on. By default they
	// commit asynchronously: a claim lost in a PostgreSQL crash only makes the job claimable again,
	// and any later synchronous commit (a completion) flushes it. Completions are always synchronous.
	DurableClaims bool
	// TracerProvider records a span per job attempt and per schedule run; nil records none (no cost).
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() (Config, error) {
	if c.InstanceID == "" {
		return c, errors.New("jobs: config: InstanceID is required")
	}
	if c.Workers <= 0 {
		c.Workers = 16
	}
	if c.BatchSize <= 0 {
		c.BatchSize = c.Workers
	}
	c.BatchSize = min(c.BatchSize, c.Workers)
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.PollInterval, time.Second)
	def(&c.Lease, 30*time.Second)
	def(&c.ShutdownTimeout, 10*time.Second)
	def(&c.Retention, 7*24*time.Hour)
	def(&c.PruneInterval, 10*time.Minute)
	def(&c.RetryBase, time.Second)
	def(&c.RetryMax, time.Hour)
	def(&c.CompleteFlush, 2*time.Millisecond)
	def(&c.DepthInterval, 15*time.Second)
	if c.CompleteBatch <= 0 {
		c.CompleteBatch = 1000
	}
	for name, d := range map[string]time.Duration{
		"PollInterval": c.PollInterval, "Lease": c.Lease, "ShutdownTimeout": c.ShutdownTimeout,
		"Retention": c.Retention, "PruneInterval": c.PruneInterval, "RetryBase": c.RetryBase,
		"RetryMax": c.RetryMax, "CompleteFlush": c.CompleteFlush,
	} {
		if d < 0 {
			return c, fmt.Errorf("jobs: config: %s must not be negative", name)
		}
	}
	if c.Lease < 100*time.Millisecond {
		return c, errors.New("jobs: config: Lease must be at least 100ms")
	}
	return c, nil
}

// Defaults of a kind's options.
const (
	defaultMaxAttempts = 5
	defaultTimeout     = time.Minute
)

func (o KindOptions) withDefaults() KindOptions {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = defaultMaxAttempts
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	return o
}
