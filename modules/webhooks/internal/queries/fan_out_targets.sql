SELECT s.tenant_id, s.id, s.event_types, s.filter, ({{failing_health}} OR h.held_until IS NOT NULL)
FROM webhook_subscriptions s LEFT JOIN webhook_subscription_health h ON h.subscription_id = s.id
WHERE s.tenant_id = ANY(CAST(@tenants AS text[])::uuid[]) AND s.status <> @disabled AND s.deleted_at IS NULL
ORDER BY s.tenant_id, s.id
