package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

type schemaCase struct {
	name    string
	schema  wmsql.SchemaAdapter
	offsets wmsql.OffsetsAdapter
}

// compareSchemas runs the same three measurements on watermill-sql's two PostgreSQL layouts, with
// an acking subscriber and no broker, so only the outbox read path differs.
func compareSchemas(ctx context.Context, o options) error {
	cases := []schemaCase{
		{"xid8 (DefaultPostgreSQLSchema)", wmsql.DefaultPostgreSQLSchema{}, wmsql.DefaultPostgreSQLOffsetsAdapter{}},
		{"queue + DeleteOnAck (PostgreSQLQueueSchema)", wmsql.PostgreSQLQueueSchema{}, wmsql.PostgreSQLQueueOffsetsAdapter{DeleteOnAck: true}},
	}
	fmt.Printf("## Outbox schema: xid8 vs queue (watermill-sql subscriber, PollInterval 20ms, batch 100, no broker)\n\n")
	fmt.Printf("| schema | idle latency | latency while another connection holds a write tx open 3s | drain throughput |\n|---|---|---|---|\n")
	for _, c := range cases {
		r, err := measureSchema(ctx, o, c)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		fmt.Printf("| %s | %s | %s | %.0f msg/s (%d rows) |\n", c.name, r.idle, r.blocked, r.drain, o.drainN)
	}
	fmt.Println()
	return nil
}

type schemaResult struct {
	idle, blocked summary
	drain         float64
}

func measureSchema(ctx context.Context, o options, c schemaCase) (schemaResult, error) {
	var res schemaResult
	dbURL, drop, err := benchenv.Throwaway(ctx, o.adminURL, "keelson_bench_schema")
	if err != nil {
		return res, err
	}
	defer drop()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return res, err
	}
	defer db.Close()
	db.SetMaxOpenConns(20)
	const topic = "bench"

	sub, err := wmsql.NewSubscriber(wmsql.BeginnerFromStdSQL(db), wmsql.SubscriberConfig{
		SchemaAdapter: c.schema, OffsetsAdapter: c.offsets, PollInterval: 20 * time.Millisecond, InitializeSchema: true,
	}, nil)
	if err != nil {
		return res, err
	}
	defer sub.Close()
	if err := sub.SubscribeInitialize(topic); err != nil {
		return res, err
	}

	// Throughput first: pre-fill, then time the drain.
	if err := prefill(ctx, db, c.schema, topic, o.drainN); err != nil {
		return res, err
	}
	lat := newLatencies()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, err := sub.Subscribe(subCtx, topic)
	if err != nil {
		return res, err
	}
	go func() {
		for m := range msgs {
			lat.receive(m.UUID)
			m.Ack()
		}
	}()
	start := time.Now()
	for lat.count() < o.drainN {
		if time.Since(start) > 5*time.Minute {
			return res, fmt.Errorf("drain stuck at %d", lat.count())
		}
		time.Sleep(2 * time.Millisecond)
	}
	res.drain = float64(o.drainN) / time.Since(start).Seconds()
	log.Printf("%s: drained %d in %s", c.name, o.drainN, time.Since(start).Round(time.Millisecond))

	publish := func() (string, error) {
		id := uuid.NewString()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return "", err
		}
		pub, err := wmsql.NewPublisher(wmsql.TxFromStdSQL(tx), wmsql.PublisherConfig{SchemaAdapter: c.schema}, nil)
		if err != nil {
			_ = tx.Rollback()
			return "", err
		}
		if err := pub.Publish(topic, message.NewMessage(id, []byte(`{}`))); err != nil {
			_ = tx.Rollback()
			return "", err
		}
		if err := tx.Commit(); err != nil {
			return "", err
		}
		lat.commit(id, time.Now())
		return id, nil
	}

	// Idle latency: one message per transaction, 20 ms apart.
	var ids []string
	for range o.idleN {
		id, err := publish()
		if err != nil {
			return res, err
		}
		ids = append(ids, id)
		time.Sleep(20 * time.Millisecond)
	}
	if err := lat.wait(ids, 30*time.Second); err != nil {
		return res, err
	}
	res.idle = lat.summarize(ids)

	// Another session holds a write transaction (it has a transaction id) open for 3 s.
	blocker, err := db.Conn(ctx)
	if err != nil {
		return res, err
	}
	defer blocker.Close()
	if _, err := blocker.ExecContext(ctx, "BEGIN"); err != nil {
		return res, err
	}
	if _, err := blocker.ExecContext(ctx, "SELECT pg_current_xact_id()"); err != nil {
		return res, err
	}
	ids = ids[:0]
	openedAt := time.Now()
	for time.Since(openedAt) < 3*time.Second {
		id, err := publish()
		if err != nil {
			return res, err
		}
		ids = append(ids, id)
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := blocker.ExecContext(ctx, "COMMIT"); err != nil {
		return res, err
	}
	if err := lat.wait(ids, 30*time.Second); err != nil {
		return res, err
	}
	res.blocked = lat.summarize(ids)
	return res, nil
}

// prefill writes n messages, 100 per transaction.
func prefill(ctx context.Context, db *sql.DB, schema wmsql.SchemaAdapter, topic string, n int) error {
	for done := 0; done < n; done += 100 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		pub, err := wmsql.NewPublisher(wmsql.TxFromStdSQL(tx), wmsql.PublisherConfig{SchemaAdapter: schema}, nil)
		if err != nil {
			return err
		}
		batch := make([]*message.Message, 0, 100)
		for range min(100, n-done) {
			batch = append(batch, message.NewMessage(uuid.NewString(), []byte(`{}`)))
		}
		if err := pub.Publish(topic, batch...); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}
