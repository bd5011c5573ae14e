SELECT coalesce(sum(due.n), 0) FROM webhook_subscriptions s
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM webhook_deliveries d
        WHERE d.subscription_id = s.id AND d.status = @pending AND d.next_attempt_at <= @now) due
WHERE s.status = @active AND s.deleted_at IS NULL
    AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = s.tenant_id AND t.disabled_at IS NOT NULL)
