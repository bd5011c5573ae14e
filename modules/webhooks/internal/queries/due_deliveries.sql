SELECT d.* FROM webhook_subscriptions s
    LEFT JOIN webhook_subscription_health h ON h.subscription_id = s.id
    CROSS JOIN LATERAL (
        SELECT x.*, row_number() OVER (ORDER BY x.next_attempt_at) AS turn
        FROM (SELECT d.*, d.xmin AS xmin FROM webhook_deliveries d
            WHERE d.subscription_id = s.id AND d.status = @pending AND d.next_attempt_at <= @now
            ORDER BY d.next_attempt_at LIMIT CASE WHEN {{failing_health}} THEN CAST(@per_subscription AS bigint) ELSE CAST(@limit AS bigint) END) x) d
WHERE s.status = @active AND s.deleted_at IS NULL
    AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = s.tenant_id AND t.disabled_at IS NOT NULL)
    -- A held endpoint waits for its hold's end, then gives one delivery, the probe.
    AND (h.held_until IS NULL OR (h.held_until <= @now AND d.turn = 1))
ORDER BY CASE WHEN d.turn > 1 AND {{failing_health}} THEN d.turn + @per_subscription ELSE d.turn END, d.next_attempt_at
LIMIT @limit
