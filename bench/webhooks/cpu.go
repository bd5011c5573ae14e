package main

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100.0

// cpuSeconds is the user+system CPU time a process has used, or 0 if it cannot be read.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are fields 14 and 15.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / clockTicks
}

// cpuSample is the CPU used so far by the service's processes, by the PostgreSQL backends of its
// database, and by a store of its own beside them (Redis for the peer; 0 for Keelson, whose broker is shared).
type cpuSample struct{ app, postgres, other float64 }

func (e *environment) cpu(ctx context.Context) cpuSample {
	var s cpuSample
	for _, p := range e.procs {
		s.app += cpuSeconds(p.Process.Pid)
	}
	s.postgres = backendsCPU(ctx, e.dbURL)
	return s
}

// backendsCPU is the CPU used so far by the PostgreSQL backends connected to the database.
func backendsCPU(ctx context.Context, dbURL string) float64 {
	var total float64
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return 0
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return 0
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			total += cpuSeconds(pid)
		}
	}
	_ = rows.Err() // a partial sum only understates the figure
	return total
}

// analyze refreshes the planner statistics of every table of the database.
func analyze(ctx context.Context, dbURL string) error {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "ANALYZE")
	return err
}
