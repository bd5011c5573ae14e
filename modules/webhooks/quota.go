package webhooks

import (
	"context"
	"fmt"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/tenancy"
)

// Defaults of the per-tenant quotas (WEBHOOKS_MAX_SUBSCRIPTIONS_PER_TENANT, WEBHOOKS_MAX_EVENT_BYTES).
const (
	defaultMaxSubscriptionsPerTenant = 100
	defaultMaxEventBytes             = 256 << 10
)

// CodeSubscriptionQuota is the 409 of a create beyond the tenant's quota of live subscriptions.
const CodeSubscriptionQuota = "subscription_quota_exceeded"

// enforceSubscriptionQuota runs in the create's transaction, after the insert, for the tenant of ctx
// (the one the insert stamped on the row). It locks that tenant's row, so creates for one tenant queue
// here whichever replica runs them, then counts the tenant's live subscriptions, the new one included:
// under READ COMMITTED that statement sees every create committed before the lock was granted, so
// two concurrent creates cannot both take the last place. FOR NO KEY UPDATE, because the inserts
// already hold FOR KEY SHARE on the tenant (their foreign key): FOR UPDATE would deadlock two of them.
func (s *Service) enforceSubscriptionQuota(ctx context.Context) error {
	tenant, err := tenancy.Require(ctx)
	if err != nil {
		return err
	}
	conn := s.store.conn(ctx)
	if err := conn.Exec(`SELECT 1 FROM tenants WHERE id = ? FOR NO KEY UPDATE`, tenant).Error; err != nil {
		return fmt.Errorf("subscription quota: lock tenant %s: %w", tenant, err)
	}
	var live int64
	if err := conn.Raw(`SELECT count(*) FROM webhook_subscriptions WHERE tenant_id = ? AND deleted_at IS NULL`, tenant).
		Row().Scan(&live); err != nil {
		return fmt.Errorf("subscription quota: count: %w", err)
	}
	if max := s.cfg.MaxSubscriptionsPerTenant; live > int64(max) {
		return apperr.StateConflict(CodeSubscriptionQuota, fmt.Sprintf(
			"the tenant has %d live subscriptions, its quota: delete one before creating another", max))
	}
	return nil
}

// checkEventSize refuses event data beyond the configured size with 413.
func (s *Service) checkEventSize(data []byte) error {
	if len(data) > s.cfg.MaxEventBytes {
		return apperr.TooLarge("data", fmt.Sprintf("is %d bytes; at most %d are accepted", len(data), s.cfg.MaxEventBytes))
	}
	return nil
}

// maxEventBytesLimit is the largest MaxEventBytes: the request body that carries the data is capped there.
const maxEventBytesLimit = httpapi.MaxBodyBytes
