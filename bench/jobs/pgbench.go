package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
)

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+)`)

// pgbenchN measures the machine's write ceiling with the simple-update script on a throwaway database.
func pgbenchN(ctx context.Context, o options) (float64, error) {
	dbURL, drop, err := throwaway(ctx, o.adminURL, "pgbench")
	if err != nil {
		return 0, err
	}
	defer drop()
	if out, err := exec.CommandContext(ctx, "pgbench", "-i", "-q", dbURL).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("pgbench -i: %w: %s", err, out)
	}
	out, err := exec.CommandContext(ctx, "pgbench", "-N", "-c", "8", "-j", "2", "-T", "10", dbURL).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench -N: %w: %s", err, out)
	}
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench -N: no tps in output: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
