// Command retention measures webhooks retention: pruning millions of old delivery and attempt rows with
// batched DELETE (what Keelson does) while a replica delivers a steady event rate, and, at a smaller
// scale, dropping time partitions holding the same kind of rows. It prints rows/s pruned, delivery
// latency before and during the prune, and table and index sizes before and after.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelson/keelson/bench/internal/benchenv"
	"github.com/keelson/keelson/modules/webhooks"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/module"
	"github.com/keelson/keelson/platform/outbox"
)

type options struct {
	adminURL, amqpURL string
	deliveries        int // old deliveries, each with one attempt: 2 × rows pruned
	partitionRows     int
	rate              int
	batch             int
}

func main() {
	var o options
	flag.StringVar(&o.adminURL, "admin-url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL server")
	flag.StringVar(&o.amqpURL, "amqp-url", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ")
	flag.IntVar(&o.deliveries, "deliveries", 1_000_000, "old finished deliveries to prune (each with one attempt)")
	flag.IntVar(&o.partitionRows, "partition-rows", 200_000, "old deliveries in the partitioned variant (each with one attempt)")
	flag.IntVar(&o.rate, "rate", 200, "events per second delivered meanwhile")
	flag.IntVar(&o.batch, "batch", 5000, "rows per DELETE batch")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "retention bench:", err)
		os.Exit(1)
	}
}

// receiver notes when each webhook-id first arrived.
type receiver struct {
	mu   sync.Mutex
	seen map[string]time.Time
	url  string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	now := time.Now()
	r.mu.Lock()
	if _, ok := r.seen[req.Header.Get("webhook-id")]; !ok {
		r.seen[req.Header.Get("webhook-id")] = now
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func run(ctx context.Context, o options) error {
	dbURL, drop, err := benchenv.Throwaway(ctx, o.adminURL, "keelson_bench_retention")
	if err != nil {
		return err
	}
	defer drop()
	dir, err := os.MkdirTemp("", "keelson-bench-retention")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "keelson")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./app").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w: %s", err, out)
	}
	prefix := fmt.Sprintf("bench.retention.%d", time.Now().UnixNano()%1_000_000)
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "AMQP_URL="+o.amqpURL, "AMQP_EXCHANGE="+prefix,
		"AMQP_QUEUE_PREFIX="+prefix, "API_TOKENS=bench", "WEBHOOKS_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOKS_RETENTION=0", "LOG_LEVEL=warn", "LOG_FORMAT=text")
	migrate := exec.CommandContext(ctx, bin, "migrate")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %w: %s", err, out)
	}
	db, err := database.Open(ctx, database.Config{URL: dbURL, MaxOpenConns: 8})
	if err != nil {
		return err
	}
	defer db.Close()

	fmt.Printf("seeding %d old succeeded deliveries with one attempt each (and their events)…\n", o.deliveries)
	start := time.Now()
	if err := seed(ctx, db.SQL(), o.deliveries); err != nil {
		return err
	}
	fmt.Printf("seeded in %s\n", time.Since(start).Round(time.Second))

	rc := &receiver{seen: map[string]time.Time{}}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	rc.url = "http://" + l.Addr().String() + "/hooks"
	go func() { _ = http.Serve(l, rc) }() //nolint:gosec // loopback receiver of a benchmark

	apiL, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := apiL.Addr().String()
	_ = apiL.Close()
	serve := exec.CommandContext(ctx, bin, "serve")
	serve.Env = append(env, "HTTP_ADDR="+addr, "INSTANCE_ID=bench-retention")
	serve.Stdout, serve.Stderr = os.Stderr, os.Stderr
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() { _ = serve.Process.Signal(syscall.SIGTERM); _ = serve.Wait() }()
	api := "http://" + addr + "/api/v1/webhooks"
	if err := waitPost(ctx, api+"/subscriptions", map[string]any{"url": rc.url, "event_types": []string{"bench.live"}}); err != nil {
		return err
	}

	sizesBefore, err := sizes(ctx, db.SQL())
	if err != nil {
		return err
	}
	pub, err := outbox.NewPublisher(db, nil)
	if err != nil {
		return err
	}
	cfg := webhooks.DefaultConfig()
	svc, err := webhooks.NewService(cfg, db, pub, module.NewRegistry(module.Deps{}).Catalog(),
		slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		return err
	}

	load := startLoad(ctx, api, o.rate, "delete")
	time.Sleep(10 * time.Second) // a baseline of steady delivery before the prune
	baselineEnd := time.Now()
	start = time.Now()
	pruned, err := svc.PruneBefore(ctx, time.Now().Add(-cfg.Retention), o.batch)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	pruneEnd := time.Now()
	time.Sleep(3 * time.Second)
	sent := load.stop()

	rows := pruned.Deliveries + pruned.Attempts + pruned.Events
	fmt.Printf("\nbatched DELETE (batch %d): %d deliveries + %d attempts + %d events = %d rows in %s: %.0f rows/s (%.0f delivery+attempt rows/s)\n",
		o.batch, pruned.Deliveries, pruned.Attempts, pruned.Events, rows, elapsed.Round(time.Millisecond),
		float64(rows)/elapsed.Seconds(), float64(pruned.Deliveries+pruned.Attempts)/elapsed.Seconds())
	report("delivery latency before the prune", sent, rc, time.Time{}, baselineEnd)
	report("delivery latency during the prune", sent, rc, baselineEnd, pruneEnd)
	sizesAfter, err := sizes(ctx, db.SQL())
	if err != nil {
		return err
	}
	if _, err := db.SQL().ExecContext(ctx, "VACUUM (ANALYZE) webhook_deliveries, webhook_attempts, webhook_events"); err != nil {
		return err
	}
	sizesVacuumed, err := sizes(ctx, db.SQL())
	if err != nil {
		return err
	}
	fmt.Println("\ntable            table+toast before → after prune → after VACUUM | indexes before → after → after VACUUM")
	for _, t := range []string{"webhook_deliveries", "webhook_attempts", "webhook_events"} {
		fmt.Printf("%-18s %8s → %8s → %8s | %8s → %8s → %8s\n", t, mb(sizesBefore[t][0]), mb(sizesAfter[t][0]),
			mb(sizesVacuumed[t][0]), mb(sizesBefore[t][1]), mb(sizesAfter[t][1]), mb(sizesVacuumed[t][1]))
	}
	return partitions(ctx, db.SQL(), o, api, rc)
}

// seed writes n old events, succeeded deliveries (to a disabled subscription) and one attempt each.
func seed(ctx context.Context, db *sql.DB, n int) error {
	for _, q := range []string{
		`INSERT INTO webhook_subscriptions (id, tenant_id, url, event_types, enabled, secret, created_at, updated_at)
		 VALUES ('00000000-0000-7000-8000-000000000001', '00000000-0000-0000-0000-000000000001', 'http://127.0.0.1:9/old', '["bench.old"]', false, 'whsec_x', now(), now())`,
		`INSERT INTO webhook_events (id, tenant_id, type, data, created_at)
		 SELECT 'old_' || g, '00000000-0000-0000-0000-000000000001', 'bench.old', '{"n":1}', now() - interval '40 days' FROM generate_series(1, $1) g`,
		`INSERT INTO webhook_deliveries (id, tenant_id, subscription_id, event_id, event_type, status, attempt_count, created_at, updated_at)
		 SELECT gen_random_uuid(), '00000000-0000-0000-0000-000000000001', '00000000-0000-7000-8000-000000000001', 'old_' || g, 'bench.old', 'succeeded', 1,
		        now() - interval '40 days', now() - interval '40 days' FROM generate_series(1, $1) g`,
		`INSERT INTO webhook_attempts (id, tenant_id, delivery_id, subscription_id, number, trigger, started_at, duration_ms, status_code, result)
		 SELECT gen_random_uuid(), tenant_id, id, subscription_id, 1, 'scheduled', created_at, 5, 204, 'succeeded'
		 FROM webhook_deliveries WHERE event_type = 'bench.old'`,
		`VACUUM (ANALYZE) webhook_events, webhook_deliveries, webhook_attempts`,
	} {
		args := []any{n}
		if !bytes.Contains([]byte(q), []byte("$1")) {
			args = nil
		}
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}

// sizes is table (with TOAST) and index bytes per table.
func sizes(ctx context.Context, db *sql.DB) (map[string][2]int64, error) {
	out := map[string][2]int64{}
	rows, err := db.QueryContext(ctx, `SELECT relname, pg_table_size(oid), pg_indexes_size(oid) FROM pg_class
		WHERE relname IN ('webhook_deliveries', 'webhook_attempts', 'webhook_events')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var t, i int64
		if err := rows.Scan(&name, &t, &i); err != nil {
			return nil, err
		}
		out[name] = [2]int64{t, i}
	}
	return out, rows.Err()
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/(1<<20)) }

// load posts events at a steady rate and remembers when each was posted.
type load struct {
	mu     sync.Mutex
	posted map[string]time.Time
	done   chan struct{}
	wg     sync.WaitGroup
}

func startLoad(ctx context.Context, api string, rate int, phase string) *load {
	l := &load{posted: map[string]time.Time{}, done: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			id := fmt.Sprintf("%s_%d", phase, i)
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				at := time.Now()
				if post(ctx, client, api+"/events", map[string]any{"id": id, "type": "bench.live", "data": map[string]int{"i": i}}) == nil {
					l.mu.Lock()
					l.posted[id] = at
					l.mu.Unlock()
				}
			}()
		}
	}()
	return l
}

func (l *load) stop() map[string]time.Time {
	close(l.done)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.posted)
}

// report prints p50/p95/max of post → receipt for events posted in [from, to).
func report(what string, posted map[string]time.Time, rc *receiver, from, to time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var lat []time.Duration
	missing := 0
	for id, at := range posted {
		if at.Before(from) || !at.Before(to) {
			continue
		}
		got, ok := rc.seen[id]
		if !ok {
			missing++
			continue
		}
		lat = append(lat, got.Sub(at))
	}
	if len(lat) == 0 {
		fmt.Printf("%s: no events\n", what)
		return
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))].Round(time.Millisecond) }
	fmt.Printf("%s: %d events, p50 %s, p95 %s, max %s, not yet received %d\n", what, len(lat), p(0.50), p(0.95), lat[len(lat)-1].Round(time.Millisecond), missing)
}

func post(ctx context.Context, client *http.Client, url string, body any) error {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer bench")
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("POST %s: %d %s", url, res.StatusCode, b)
	}
	return nil
}

func waitPost(ctx context.Context, url string, body any) error {
	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		err := post(ctx, client, url, body)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// partitions measures the alternative: deliveries and attempts partitioned by day (the primary key and
// the attempts' foreign key must carry the partition key), old days dropped whole. The replica keeps
// delivering on its own tables meanwhile, so the figure is the drop's cost and its effect on the database.
func partitions(ctx context.Context, db *sql.DB, o options, api string, rc *receiver) error {
	const days = 10
	ddl := []string{
		`CREATE TABLE part_deliveries (id uuid NOT NULL, created_at timestamptz NOT NULL, subscription_id uuid NOT NULL,
			event_id text NOT NULL, status text NOT NULL, updated_at timestamptz NOT NULL, PRIMARY KEY (id, created_at))
			PARTITION BY RANGE (created_at)`,
		`CREATE TABLE part_attempts (id uuid NOT NULL, delivery_id uuid NOT NULL, delivery_created_at timestamptz NOT NULL,
			number int NOT NULL, started_at timestamptz NOT NULL, status_code int,
			PRIMARY KEY (id, delivery_created_at),
			FOREIGN KEY (delivery_id, delivery_created_at) REFERENCES part_deliveries (id, created_at))
			PARTITION BY RANGE (delivery_created_at)`,
	}
	for d := range days {
		from := fmt.Sprintf("date_trunc('day', now()) - interval '%d days'", 40+d)
		to := fmt.Sprintf("date_trunc('day', now()) - interval '%d days'", 39+d)
		ddl = append(ddl,
			fmt.Sprintf(`CREATE TABLE part_deliveries_%d PARTITION OF part_deliveries FOR VALUES FROM (%s) TO (%s)`, d, from, to),
			fmt.Sprintf(`CREATE TABLE part_attempts_%d PARTITION OF part_attempts FOR VALUES FROM (%s) TO (%s)`, d, from, to))
	}
	ddl = append(ddl,
		fmt.Sprintf(`INSERT INTO part_deliveries SELECT gen_random_uuid(), date_trunc('day', now()) - interval '40 days' - (g %% %d) * interval '1 day' + interval '1 hour',
			'00000000-0000-7000-8000-000000000001', 'old_' || g, 'succeeded', now() FROM generate_series(1, %d) g`, days, o.partitionRows),
		`INSERT INTO part_attempts SELECT gen_random_uuid(), id, created_at, 1, created_at, 204 FROM part_deliveries`,
		`VACUUM (ANALYZE) part_deliveries, part_attempts`)
	for _, q := range ddl {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("partitions: %w", err)
		}
	}
	var before int64
	if err := db.QueryRowContext(ctx, `SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits
		WHERE inhparent IN ('part_deliveries'::regclass, 'part_attempts'::regclass)`).Scan(&before); err != nil {
		return err
	}
	l := startLoad(ctx, api, o.rate, "partition")
	time.Sleep(5 * time.Second)
	start := time.Now()
	for d := range days {
		// Attempts first: a deliveries partition still referenced cannot be detached. DETACH … CONCURRENTLY
		// runs outside a transaction and never blocks the writers of the other partitions.
		for _, q := range []string{
			fmt.Sprintf(`ALTER TABLE part_attempts DETACH PARTITION part_attempts_%d CONCURRENTLY`, d),
			fmt.Sprintf(`DROP TABLE part_attempts_%d`, d),
			fmt.Sprintf(`ALTER TABLE part_deliveries DETACH PARTITION part_deliveries_%d CONCURRENTLY`, d),
			fmt.Sprintf(`DROP TABLE part_deliveries_%d`, d),
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("drop partitions: %w", err)
			}
		}
	}
	elapsed := time.Since(start)
	end := time.Now()
	time.Sleep(3 * time.Second)
	sent := l.stop()
	rows := 2 * o.partitionRows
	fmt.Printf("\npartitions (%d days): %d delivery+attempt rows (%s on disk, indexes included) dropped in %s: %.0f rows/s; disk returned at once, no VACUUM\n",
		days, rows, mb(before), elapsed.Round(time.Millisecond), float64(rows)/elapsed.Seconds())
	report("delivery latency during the partition drops", sent, rc, start, end)
	return nil
}
