package messaging

import (
	"context"
	"errors"
	"fmt"

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
