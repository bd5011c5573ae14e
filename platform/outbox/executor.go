package outbox

import (
	"context"
	"fmt"

	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"gorm.io/gorm"
)

// connPoolExecutor lets watermill-sql write through GORM's connection of the transaction, whatever
// wraps it (*sql.Tx, or *gorm.PreparedStmtTX with PrepareStmt on).
type connPoolExecutor struct {
	pool gorm.ConnPool
}

func (e connPoolExecutor) ExecContext(ctx context.Context, query string, args ...any) (wmsql.Result, error) {
	return e.pool.ExecContext(ctx, query, args...)
}

func (e connPoolExecutor) QueryContext(ctx context.Context, query string, args ...any) (wmsql.Rows, error) {
	return e.pool.QueryContext(ctx, query, args...) //nolint:rowserrcheck // watermill-sql reads the rows and checks Err
}

// txExecutor refuses a handle that is not a transaction: through a pool the row would autocommit.
func txExecutor(tx *gorm.DB) (wmsql.ContextExecutor, error) {
	pool := tx.Statement.ConnPool
	if _, ok := pool.(gorm.TxCommitter); !ok {
		return nil, fmt.Errorf("%w (connection is %T, not a transaction)", ErrNoTransaction, pool)
	}
	return connPoolExecutor{pool: pool}, nil
}
