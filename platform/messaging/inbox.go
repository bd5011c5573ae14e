package messaging

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelson/keelson/platform/database"
)

// ProcessOnce runs fn at most once per (consumer, messageID) in effect: the inbox row and fn's writes
// commit together, so a redelivered message finds the row and fn is skipped (nil is returned).
// If fn fails, nothing is recorded and a redelivery runs it again. A concurrent duplicate waits on
// the first one's insert and is skipped once it commits.
func ProcessOnce(ctx context.Context, db *database.DB, consumer, messageID string, fn func(ctx context.Context) error) error {
	if db == nil || fn == nil {
		return errors.New("inbox: nil database or function")
	}
	if consumer == "" || messageID == "" {
		return errors.New("inbox: empty consumer or message id")
	}
	return db.WithTx(ctx, func(ctx context.Context) error {
		// ON CONFLICT DO NOTHING: a unique violation would abort the whole transaction.
		res := db.Conn(ctx).Exec(
			`INSERT INTO inbox_messages (consumer, message_id) VALUES (?, ?) ON CONFLICT DO NOTHING`,
			consumer, messageID)
		if res.Error != nil {
			return fmt.Errorf("inbox %s %s: %w", consumer, messageID, res.Error)
		}
		if res.RowsAffected == 0 {
			return nil
		}
		return fn(ctx)
	})
}

// PruneInbox deletes inbox rows processed before olderThan ago and returns how many went. Run it
// from a schedule; keep olderThan well above the longest redelivery delay (days, not minutes).
func PruneInbox(ctx context.Context, db *database.DB, olderThan time.Duration) (int64, error) {
	if db == nil || olderThan <= 0 {
		return 0, errors.New("inbox: nil database or non-positive retention")
	}
	res := db.Conn(ctx).Exec(`DELETE FROM inbox_messages WHERE processed_at < now() - make_interval(secs => ?)`, olderThan.Seconds())
	if res.Error != nil {
		return 0, fmt.Errorf("inbox: prune: %w", res.Error)
	}
	return res.RowsAffected, nil
}
