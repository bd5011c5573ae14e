// Package benchenv is what the benchmark programs share: the report's header and load average,
// throwaway databases and the machine's PostgreSQL ceiling (pgbench -N) measured in the same run.
package benchenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver
)

// Header prints the report's title with the machine it runs on and the load average at the start.
func Header(name string) {
	host, _ := os.Hostname()
	fmt.Printf("# %s benchmark — %s, %d CPUs, %s, %s\n\n", name, host, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("load average at start: %s\n\n", LoadAverage())
}

// LoadAverage is /proc/loadavg without its newline ("?" where there is none): the figures beside it
// are only as good as the machine was idle.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) == 0 {
		return "?"
	}
	return string(b[:len(b)-1])
}

// Throwaway creates an empty database and returns its URL and a function that drops it.
func Throwaway(ctx context.Context, adminURL, prefix string) (string, func(), error) {
	admin, err := sql.Open("pgx", adminURL)
	if err != nil {
		return "", nil, err
	}
	defer admin.Close()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := prefix + "_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create %s: %w", name, err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		admin, err := sql.Open("pgx", adminURL)
		if err != nil {
			return
		}
		defer admin.Close()
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}

var tpsPattern = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// Pgbench runs `pgbench -N -c 8 -j 2 -T 10` on a throwaway database and returns its tps. If started
// is not nil it is closed once the timed run begins.
func Pgbench(ctx context.Context, adminURL string, started chan<- struct{}) (float64, error) {
	dbURL, drop, err := Throwaway(ctx, adminURL, "keelson_pgbench")
	if err != nil {
		return 0, err
	}
	defer drop()
	if out, err := exec.CommandContext(ctx, "pgbench", "-i", "-q", dbURL).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("pgbench -i: %w: %s", err, out)
	}
	if started != nil {
		close(started)
	}
	out, err := exec.CommandContext(ctx, "pgbench", "-N", "-c", "8", "-j", "2", "-T", "10", dbURL).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench -N: %w: %s", err, out)
	}
	m := tpsPattern.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench output without tps: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
