package main

import (
	"runtime/debug"
	"testing"
)

func TestServeCollectsGarbageLessOftenUnlessTheOperatorSetGOGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	if got := setServeGC(func(string) string { return "" }); got != serveGCPercent {
		t.Fatalf("without GOGC: %d, want %d", got, serveGCPercent)
	}
	if now := debug.SetGCPercent(150); now != serveGCPercent {
		t.Fatalf("the runtime's GC percent is %d, want %d", now, serveGCPercent)
	}
	// GOGC=150 was read by the runtime at start: serve keeps it.
	if got := setServeGC(func(k string) string { return map[string]string{"GOGC": "150"}[k] }); got != 150 {
		t.Fatalf("with GOGC=150: %d, want 150", got)
	}
	if now := debug.SetGCPercent(100); now != 150 {
		t.Fatalf("the runtime's GC percent is %d, want 150 (the operator's)", now)
	}
}
