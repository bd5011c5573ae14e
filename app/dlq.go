package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/telemetry"
)

var errDLQUsage = errors.New("usage: keelson dlq list | keelson dlq replay QUEUE [--limit N]")

// dlq inspects and replays dead-lettered messages: `list` shows every consumer's dead-letter queue and
// its depth; `replay QUEUE` moves its messages back to the consumer's queue (QUEUE is the consumer,
// its queue or its dead-letter queue, as `list` prints them).
func dlq(ctx context.Context, cfg Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errDLQUsage
	}
	// Arguments are checked before anything connects: a mistyped flag is a usage error, not a failed connection.
	fs := flag.NewFlagSet("keelson dlq replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	limit := fs.Int("limit", 0, "replay at most N messages (0 = all waiting now)")
	switch args[0] {
	case "list":
		if len(args) != 1 {
			return errDLQUsage
		}
	case "replay":
		if len(args) < 2 || fs.Parse(args[2:]) != nil || fs.NArg() != 0 || *limit < 0 {
			return errDLQUsage
		}
	default:
		return errDLQUsage
	}
	consumers, err := consumerNames(ctx, cfg, logger)
	if err != nil {
		return err
	}
	bus := messaging.Config{AMQPURL: cfg.AMQPURL, Exchange: cfg.AMQPExchange, QueuePrefix: cfg.AMQPQueuePrefix}
	switch args[0] {
	case "list":
		queues, err := messaging.ListDeadLetters(ctx, bus, consumers)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "CONSUMER\tDEAD-LETTER QUEUE\tMESSAGES")
		for _, q := range queues {
			fmt.Fprintf(w, "%s\t%s\t%d\n", q.Consumer, q.Dead, q.Messages)
		}
		return w.Flush()
	case "replay":
		consumer, ok := consumerOf(args[1], cfg.AMQPQueuePrefix, consumers)
		if !ok {
			return fmt.Errorf("dlq: %q is no consumer (known: %s)", args[1], strings.Join(consumers, ", "))
		}
		n, err := messaging.ReplayDeadLetters(ctx, bus, consumer, *limit)
		fmt.Fprintf(stdout, "replayed %d message(s) from %s.%s.dead to %s.%s\n", n, cfg.AMQPQueuePrefix, consumer, cfg.AMQPQueuePrefix, consumer)
		return err
	default:
		return errDLQUsage
	}
}

// consumerOf accepts a consumer name, its queue or its dead-letter queue.
func consumerOf(name, prefix string, consumers []string) (string, bool) {
	name = strings.TrimSuffix(strings.TrimPrefix(name, prefix+"."), ".dead")
	for _, c := range consumers {
		if c == name {
			return c, true
		}
	}
	return "", false
}

// consumerNames are the consumers this binary's modules declare, as `serve` would register them.
func consumerNames(ctx context.Context, cfg Config, logger *slog.Logger) ([]string, error) {
	mods, err := modules(cfg)
	if err != nil {
		return nil, err
	}
	db, err := openForCommand(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	replica, err := newReplica(cfg, logger, db, mods, telemetry.Tracing{}, nil) // declares, runs nothing: no spans
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range replica.Registry.Subscriptions() {
		names = append(names, s.Consumer)
	}
	return names, nil
}

// openForCommand opens the small pool a one-shot command needs.
func openForCommand(ctx context.Context, cfg Config) (*database.DB, error) {
	return database.Open(ctx, database.Config{URL: cfg.DatabaseURL, TransactionPooling: cfg.DBTransactionPool, MaxOpenConns: 2})
}
