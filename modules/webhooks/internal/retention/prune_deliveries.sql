WITH doomed AS (
    SELECT id FROM webhook_deliveries
    WHERE id > @after AND id < @bound AND status IN ('succeeded', 'failed') AND updated_at < @cutoff
    ORDER BY id LIMIT @batch FOR UPDATE SKIP LOCKED),
attempts AS (DELETE FROM webhook_attempts a USING doomed WHERE a.delivery_id = doomed.id RETURNING 1),
deliveries AS (DELETE FROM webhook_deliveries d USING doomed WHERE d.id = doomed.id RETURNING 1)
SELECT (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM attempts) AS attempts,
    (SELECT id FROM doomed ORDER BY id DESC LIMIT 1) AS last
