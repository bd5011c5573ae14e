package webhooks

import (
	"context"

	"github.com/keelson/keelson/platform/tenancy"
)

// sealedKeyIDs lists the ids of the keys subscriptions' secrets, header values and TLS client keys are sealed under
// (the "v1:<id>:" prefix), for the start-up check that this replica holds every one of them.
func (s *Service) sealedKeyIDs(ctx context.Context) ([]string, error) {
	ctx = tenancy.System(ctx, "sealed key ids") // every tenant's subscriptions
	var ids []string
	err := s.store.conn(ctx).Raw(`SELECT DISTINCT split_part(v, ':', 2) FROM (
			SELECT secret AS v FROM webhook_subscriptions WHERE starts_with(secret, 'v1:')
			UNION ALL
			SELECT p->>'secret' FROM webhook_subscriptions, jsonb_array_elements(previous_secrets) p
			WHERE starts_with(p->>'secret', 'v1:')
			UNION ALL
			SELECT h.value FROM webhook_subscriptions, jsonb_each_text(headers::jsonb) h WHERE starts_with(h.value, 'v1:')
			UNION ALL
			SELECT tls_client_key FROM webhook_subscriptions WHERE starts_with(tls_client_key, 'v1:')
		) sealed ORDER BY 1`).Scan(&ids).Error
	return ids, err
}
