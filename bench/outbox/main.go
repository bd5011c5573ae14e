// Command outbox measures the transactional outbox on this machine: watermill-sql's xid8 schema
// against the queue schema (latency idle and behind an open write transaction, drain throughput),
// then the whole path through platform/messaging (commit→consumer latency idle and under load,
// forwarder throughput with publisher confirms), next to pgbench -N for scale.
//
//	go run ./bench/outbox [-pg postgres://postgres@127.0.0.1:5432/postgres] [-amqp amqp://guest:guest@127.0.0.1:5672/]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/keelson/keelson/bench/internal/benchenv"
)

type options struct {
	adminURL   string
	amqpURL    string
	drainN     int
	idleN      int
	loadRate   int
	loadFor    time.Duration
	forwarders []int
	skipSchema bool
}

func main() {
	var o options
	flag.StringVar(&o.adminURL, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL admin URL (throwaway databases are created and dropped)")
	flag.StringVar(&o.amqpURL, "amqp", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ URL")
	flag.IntVar(&o.drainN, "drain", 10000, "events pre-filled for throughput runs")
	flag.IntVar(&o.idleN, "idle", 300, "events for idle latency")
	flag.IntVar(&o.loadRate, "rate", 500, "offered events/s for the latency-under-load run")
	flag.DurationVar(&o.loadFor, "load", 10*time.Second, "duration of the load runs")
	flag.BoolVar(&o.skipSchema, "skip-schema", false, "skip the xid8-vs-queue schema comparison")
	flag.Parse()
	o.forwarders = []int{1, 2, 4}

	log.SetFlags(log.Ltime)
	ctx := context.Background()
	benchenv.Header("outbox")

	if !o.skipSchema {
		if err := compareSchemas(ctx, o); err != nil {
			log.Fatalf("schema comparison: %v", err)
		}
	}
	if err := endToEnd(ctx, o); err != nil {
		log.Fatalf("end to end: %v", err)
	}
	tps, err := benchenv.Pgbench(ctx, o.adminURL, nil)
	if err != nil {
		log.Fatalf("pgbench: %v", err)
	}
	fmt.Printf("## pgbench -N -c 8 -j 2 -T 10 (alone)\n\n%.0f tps\n\nload average at end: %s\n", tps, benchenv.LoadAverage())
}
