package hosttest

import (
	"testing"
	"time"

	"github.com/keelson/keelson/platform/database"
)

// Eventually polls cond until it holds, or fails the test once timeout has passed.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %s: "+format, append([]any{timeout}, args...)...)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Count runs a query returning one number, such as SELECT count(*).
func Count(t testing.TB, db *database.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.Gorm().Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatalf("hosttest: %s: %v", query, err)
	}
	return n
}
