package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/tenancy"
)

// recoverJob is the job kind that re-queues a subscription's failed deliveries in batches.
const recoverJob = "webhooks.recover"

// recoverBatch is how many deliveries one recovery transaction re-queues.
const recoverBatch = 200

// recoverConflictRetries bounds how many times in a row a batch may lose a race before the job attempt fails
// (and the job is retried with backoff). Each loss halves the next batch, so busy rows cannot starve it.
const recoverConflictRetries = 50

// OperationStatus is where a background operation stands.
type OperationStatus string

// Operation statuses.
const (
	OperationQueued    OperationStatus = "queued"
	OperationRunning   OperationStatus = "running"
	OperationSucceeded OperationStatus = "succeeded"
	OperationFailed    OperationStatus = "failed"
)

// Operation is a background operation started over the API: a bulk recovery.
type Operation struct {
	ID uuid.UUID `gorm:"column:id;primaryKey"`
	tenancy.Owned
	Kind           string          `gorm:"column:kind"`
	SubscriptionID uuid.UUID       `gorm:"column:subscription_id"`
	Since          time.Time       `gorm:"column:since"`
	Until          *time.Time      `gorm:"column:until"`
	Status         OperationStatus `gorm:"column:status"`
	Total          int             `gorm:"column:total"`
	Requeued       int             `gorm:"column:requeued"`
	Cursor         *uuid.UUID      `gorm:"column:cursor"`
	Error          string          `gorm:"column:error"`
	CreatedAt      time.Time       `gorm:"column:created_at"`
	UpdatedAt      time.Time       `gorm:"column:updated_at"`
	FinishedAt     *time.Time      `gorm:"column:finished_at"`
}

// TableName is the module's table.
func (Operation) TableName() string { return "webhook_operations" }

// Progress is the share of the matched deliveries re-queued so far, 0 to 1.
func (o *Operation) Progress() float64 {
	switch {
	case o.Status == OperationSucceeded:
		return 1
	case o.Total == 0:
		return 0
	default:
		return min(1, float64(o.Requeued)/float64(o.Total))
	}
}

// RecoverInput is a recovery request: failed deliveries created in [Since, Until) (Until nil = up to now).
type RecoverInput struct {
	Since *time.Time
	Until *time.Time
}

type recoverPayload struct {
	OperationID uuid.UUID `json:"operation_id"`
}

// Recover records a recovery operation of one subscription's failed deliveries and enqueues its job,
// in one unit of work; the job does the work in batches.
func (s *Service) Recover(ctx context.Context, subscriptionID uuid.UUID, in RecoverInput) (Operation, error) {
	var v apperr.Validator
	v.Check(in.Since != nil, "since", "is required (RFC 3339)")
	v.Check(in.Since == nil || in.Until == nil || in.Until.After(*in.Since), "until", "must be after since")
	if err := v.Err(); err != nil {
		return Operation{}, err
	}
	if s.jobs == nil {
		return Operation{}, errors.New("webhooks: recovery needs the jobs client")
	}
	var op Operation
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		if _, err := s.store.subscription(ctx, subscriptionID); err != nil {
			return err
		}
		now := s.now()
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		op = Operation{ID: id, Kind: "recover", SubscriptionID: subscriptionID, Since: in.Since.UTC(),
			Status: OperationQueued, CreatedAt: now, UpdatedAt: now}
		if in.Until != nil {
			until := in.Until.UTC()
			op.Until = &until
		}
		if op.Total, err = s.store.countRecoverable(ctx, &op); err != nil {
			return err
		}
		if err := s.db.Conn(ctx).Create(&op).Error; err != nil {
			return fmt.Errorf("store operation: %w", err)
		}
		_, err = s.jobs.Enqueue(ctx, recoverJob, recoverPayload{OperationID: op.ID}, jobs.EnqueueOptions{})
		return err
	})
	return op, err
}

// Operation reads a background operation.
func (s *Service) Operation(ctx context.Context, id uuid.UUID) (Operation, error) {
	var op Operation
	if err := s.db.Conn(ctx).Where("id = ?", id).Take(&op).Error; err != nil {
		return Operation{}, notFound(err, "operation", id)
	}
	return op, nil
}

// runRecovery re-queues the operation's failed deliveries batch after batch until none is left. Each
// batch is one unit of work with the sweep's claim rules: every delivery is redelivered (a fresh claim,
// saved with the xmin check) and requested once; if a sweep, consumer or redelivery changed one of the
// rows meanwhile, the whole batch rolls back — claims, requests and the operation's progress — and is
// read again: the rows the other writer made pending are no longer failed and drop out.
func (s *Service) runRecovery(ctx context.Context, job jobs.Job) error {
	var p recoverPayload
	if err := job.Decode(&p); err != nil {
		return err
	}
	op, err := s.Operation(ctx, p.OperationID)
	if err != nil {
		return err
	}
	if op.Status == OperationSucceeded || op.Status == OperationFailed {
		return nil
	}
	if err := s.db.Conn(ctx).Model(&op).Updates(map[string]any{"status": OperationRunning, "updated_at": s.now()}).Error; err != nil {
		return err
	}
	conflicts, size := 0, recoverBatch
	for {
		n, err := s.recoverNextBatch(ctx, op.ID, size)
		if errors.Is(err, concurrency.ErrConflict) {
			conflicts++
			size = max(1, size/2)
			if conflicts > recoverConflictRetries {
				return fmt.Errorf("recovery %s: batches keep losing races: %w", op.ID, err)
			}
			s.log.Info("recovery batch lost a race; rolled back whole, reading it again, smaller",
				"operation_id", op.ID, "batch", size, "error", err)
			continue
		}
		if err != nil {
			if job.Attempt >= job.MaxAttempts {
				// The job's own error is what the runner records; the operation's row says failed if it can.
				err = errors.Join(err, s.finishOperation(ctx, op.ID, OperationFailed, err.Error()))
			}
			return err
		}
		conflicts, size = 0, min(recoverBatch, size*2)
		if n == 0 {
			return s.finishOperation(ctx, op.ID, OperationSucceeded, "")
		}
	}
}

// recoverNextBatch re-queues the next batch after the operation's cursor; 0 when none is left.
func (s *Service) recoverNextBatch(ctx context.Context, opID uuid.UUID, size int) (int, error) {
	requeued := 0
	err := s.db.WithTx(ctx, func(ctx context.Context) error {
		var op Operation
		if err := s.db.Conn(ctx).Where("id = ?", opID).Take(&op).Error; err != nil {
			return err
		}
		batch, err := s.store.recoverable(ctx, &op, size)
		if err != nil || len(batch) == 0 {
			return err
		}
		now := s.now()
		for _, d := range batch {
			d.Redeliver(now, s.cfg.ClaimLease, s.instance)
			if err := s.store.saveDelivery(ctx, d); err != nil {
				return err
			}
		}
		requests, err := s.deliveryRequests(ctx, batch)
		if err != nil {
			return err
		}
		if err := s.events.Publish(ctx, requests...); err != nil {
			return fmt.Errorf("publish delivery requests: %w", err)
		}
		last := batch[len(batch)-1].ID
		requeued = len(batch)
		tenant, err := tenancy.Require(ctx)
		if err != nil {
			return err
		}
		return s.db.Conn(ctx).Exec(`UPDATE webhook_operations SET cursor = ?, requeued = requeued + ?, updated_at = ?
			WHERE tenant_id = ? AND id = ?`, last, requeued, now, tenant, opID).Error
	})
	return requeued, err
}

func (s *Service) finishOperation(ctx context.Context, id uuid.UUID, status OperationStatus, message string) error {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	return s.db.Conn(ctx).Exec(`UPDATE webhook_operations SET status = ?, error = ?, updated_at = ?, finished_at = ?
		WHERE tenant_id = ? AND id = ?`, status, message, now, now, tenant, id).Error
}

// recoverable are the operation's failed deliveries after its cursor, in id order.
func (s store) recoverable(ctx context.Context, op *Operation, limit int) ([]*Delivery, error) {
	q := s.recoverableQuery(ctx, op)
	if op.Cursor != nil {
		q = q.Where("id > ?", *op.Cursor)
	}
	var ds []*Delivery
	err := q.Order("id").Limit(limit).Find(&ds).Error
	return ds, err
}

func (s store) countRecoverable(ctx context.Context, op *Operation) (int, error) {
	var n int64
	err := s.recoverableQuery(ctx, op).Count(&n).Error
	return int(n), err
}

func (s store) recoverableQuery(ctx context.Context, op *Operation) *gorm.DB {
	q := s.conn(ctx).Model(&Delivery{}).Where("subscription_id = ? AND status = ? AND created_at >= ?",
		op.SubscriptionID, StatusFailed, op.Since)
	if op.Until != nil {
		q = q.Where("created_at < ?", *op.Until)
	}
	return q
}
