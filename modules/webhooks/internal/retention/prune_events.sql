DELETE FROM webhook_events WHERE (tenant_id, id) IN (
    SELECT e.tenant_id, e.id FROM webhook_events e
    WHERE e.created_at < @cutoff AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.tenant_id = e.tenant_id AND d.event_id = e.id)
    ORDER BY e.created_at LIMIT @batch FOR UPDATE SKIP LOCKED)
