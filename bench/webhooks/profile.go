package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// profiler collects, for -profile DIR, what the sustained delivery phase spends: PostgreSQL's
// statements (pg_stat_statements, which needs shared_preload_libraries on the server) and a CPU
// profile of one replica when the replica serves /debug/pprof.
type profiler struct {
	dir    string
	dbURL  string
	api    string // the replica to profile
	pid    int    // its process, for perf when it serves no pprof endpoint
	period time.Duration

	cpuDone chan string // what the CPU profile step did, one line
	before  dbCounters
}

// dbCounters are the database's commits and the cluster's WAL writes so far.
type dbCounters struct {
	commits, rollbacks, walRecords, walBytes, walSyncs int64
}

func readCounters(ctx context.Context, db *sql.DB) (dbCounters, error) {
	var c dbCounters
	err := db.QueryRowContext(ctx, `
		SELECT d.xact_commit, d.xact_rollback, w.wal_records, w.wal_bytes, w.wal_sync
		FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()`).
		Scan(&c.commits, &c.rollbacks, &c.walRecords, &c.walBytes, &c.walSyncs)
	return c, err
}

func newProfiler(ctx context.Context, dir, dbURL, api string, pid int, period time.Duration) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return nil, fmt.Errorf("pg_stat_statements (the server needs shared_preload_libraries='pg_stat_statements'): %w", err)
	}
	return &profiler{dir: dir, dbURL: dbURL, api: api, pid: pid, period: period}, nil
}

// start forgets the statements counted so far and, after a few seconds of sustained load, profiles the replica.
func (p *profiler) start(ctx context.Context) error {
	db, err := sql.Open("pgx", p.dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return err
	}
	if p.before, err = readCounters(ctx, db); err != nil {
		return err
	}
	p.cpuDone = make(chan string, 1)
	go func() { p.cpuDone <- p.cpuProfile(ctx) }()
	return nil
}

// cpuProfile asks the replica for a CPU profile 3 s into the phase and stores it as DIR/replica-cpu.pprof.
func (p *profiler) cpuProfile(ctx context.Context) string {
	time.Sleep(3 * time.Second) // past the first burst of ingestion: deliveries are flowing
	if p.api == "" {
		return "CPU profile: " + p.perfProfile(ctx)
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.api, int(p.period.Seconds()))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := (&http.Client{Timeout: p.period + 30*time.Second}).Do(req)
	if err != nil {
		return "replica CPU profile: " + err.Error() + "; " + p.perfProfile(ctx)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("replica CPU profile: %s answered %d, the binary serves no pprof endpoint; %s",
			url, resp.StatusCode, p.perfProfile(ctx))
	}
	path := filepath.Join(p.dir, "replica-cpu.pprof")
	f, err := os.Create(filepath.Clean(path))
	if err != nil {
		return "replica CPU profile: " + err.Error()
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return "replica CPU profile: " + err.Error()
	}
	return "replica CPU profile: " + path + " (go tool pprof -top " + path + ")"
}

// report prints the top statements of the phase by total time, with calls per delivery, and writes
// them all to DIR/pg_stat_statements.md.
func (p *profiler) report(ctx context.Context, deliveries int64) error {
	if p.cpuDone != nil {
		fmt.Println(<-p.cpuDone)
		fmt.Println()
	}
	db, err := sql.Open("pgx", p.dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	time.Sleep(time.Second) // backends publish their counters at most once a second
	after, err := readCounters(ctx, db)
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, `
		SELECT calls, total_exec_time, mean_exec_time, rows, query
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT LIKE '%pg_stat_statements%'
		ORDER BY total_exec_time DESC`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "## PostgreSQL statements of the throughput phase (pg_stat_statements, %d deliveries)\n\n", deliveries)
	fmt.Fprintf(&b, "| total ms | calls | calls/delivery | mean ms | rows | statement |\n|---|---|---|---|---|---|\n")
	var allMS float64
	var allCalls int64
	shown := 0
	for rows.Next() {
		var calls, n int64
		var total, mean float64
		var query string
		if err := rows.Scan(&calls, &total, &mean, &n, &query); err != nil {
			return err
		}
		allMS += total
		allCalls += calls
		fmt.Fprintf(&b, "| %.0f | %d | %.2f | %.3f | %d | `%s` |\n", total, calls, float64(calls)/float64(deliveries), mean, n, oneLine(query, 160))
		shown++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	per := func(n int64) float64 { return float64(n) / float64(deliveries) }
	fmt.Fprintf(&b, "\n%d statements, %d calls (%.2f per delivery), %.0f ms executing (%.3f ms per delivery)\n\n",
		shown, allCalls, per(allCalls), allMS, allMS/float64(deliveries))
	fmt.Fprintf(&b, "per delivery: %.2f commits, %.3f rollbacks (this database); %.1f WAL records, %.0f WAL bytes, %.3f WAL syncs (cluster)\n\n",
		per(after.commits-p.before.commits), per(after.rollbacks-p.before.rollbacks),
		per(after.walRecords-p.before.walRecords), per(after.walBytes-p.before.walBytes), per(after.walSyncs-p.before.walSyncs))
	path := filepath.Join(p.dir, "pg_stat_statements.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return err
	}
	// On the terminal, the top 15.
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		if i < 4+15 || strings.HasPrefix(l, fmt.Sprint(shown)+" statements") || strings.HasPrefix(l, "per delivery:") {
			fmt.Println(l)
		}
	}
	fmt.Printf("(all statements in %s)\n\n", path)
	return nil
}

func oneLine(q string, limit int) string {
	q = strings.Join(strings.Fields(q), " ")
	q = strings.ReplaceAll(q, "|", "\\|")
	q = strings.ReplaceAll(q, "`", "'")
	if len(q) > limit {
		q = q[:limit] + "…"
	}
	return q
}

// perfProfile samples the replica with perf (Go binaries keep their symbols) and writes the functions
// by inclusive and by own time to DIR/replica-perf.txt.
func (p *profiler) perfProfile(ctx context.Context) string {
	if _, err := exec.LookPath("perf"); err != nil {
		return "perf is not installed either: profile the same path in one process with " +
			"go test -run '^$' -bench Pipeline -cpuprofile cpu.pprof ./modules/webhooks"
	}
	data := filepath.Join(p.dir, "replica.perf.data")
	secs := strconv.Itoa(int(p.period.Seconds()))
	if out, err := exec.CommandContext(ctx, "perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(p.pid), "-o", data, "--", "sleep", secs).CombinedOutput(); err != nil {
		return fmt.Sprintf("perf record: %v: %s", err, out)
	}
	var text strings.Builder
	for _, mode := range []string{"--children", "--no-children"} {
		out, err := exec.CommandContext(ctx, "perf", "report", "-i", data, mode, "--sort", "symbol", "--stdio", "-g", "none").Output()
		if err != nil {
			return fmt.Sprintf("perf report: %v", err)
		}
		fmt.Fprintf(&text, "# perf report %s\n", mode)
		n := 0
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "%") && !strings.HasPrefix(l, "#") && n < 80 {
				text.WriteString(strings.TrimRight(l, " -") + "\n")
				n++
			}
		}
	}
	path := filepath.Join(p.dir, "replica-perf.txt")
	if err := os.WriteFile(path, []byte(text.String()), 0o600); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("sampled process %d with perf for %s s: %s (raw samples in %s)", p.pid, secs, path, data)
}
