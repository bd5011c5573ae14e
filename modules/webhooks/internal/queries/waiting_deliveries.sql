SELECT d.*, d.xmin AS xmin FROM webhook_deliveries d
JOIN webhook_subscriptions s ON s.id = d.subscription_id
WHERE d.tenant_id = @tenant AND d.status = @pending AND d.id > @after
    AND (d.next_attempt_at <= @now OR (d.claim_id IS NOT NULL AND d.sent_claim_id IS DISTINCT FROM d.claim_id
        AND d.next_attempt_at <= @lease_end_by))
    AND s.tenant_id = d.tenant_id AND s.status = @active AND s.deleted_at IS NULL
    AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = d.tenant_id AND t.disabled_at IS NOT NULL)
ORDER BY d.id
LIMIT @limit
