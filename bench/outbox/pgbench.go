package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
)

var tpsPattern = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbench runs pgbench -N -c 8 -j 2 -T 10 on a throwaway database. If started is not nil it is
// closed once the timed run begins.
func pgbench(ctx context.Context, adminURL string, started chan<- struct{}) (float64, error) {
	dbURL, drop, err := throwaway(ctx, adminURL, "keelson_pgbench")
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
