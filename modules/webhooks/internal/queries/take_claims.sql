WITH r AS (
    SELECT * FROM unnest(CAST(@ids AS text[])::uuid[], CAST(@tenants AS text[])::uuid[], CAST(@claims AS text[])::uuid[],
        CAST(@attempts AS text[])::uuid[], CAST(@slots AS timestamptz[])) AS r(id, tenant, claim, attempt, slot)),
sub AS (
    SELECT s.id, s.url, s.secret, s.previous_secrets, s.headers, s.xmin,
        s.proxy_url, s.tls_client_certificate, s.tls_client_key, s.tls_ca_bundle, s.transform
    FROM webhook_subscriptions s
    WHERE s.id IN (SELECT d0.subscription_id FROM r JOIN webhook_deliveries d0 ON d0.id = r.id AND d0.tenant_id = r.tenant)
        AND s.status = 'active' AND s.deleted_at IS NULL
        AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = s.tenant_id AND t.disabled_at IS NOT NULL)
    ORDER BY s.id FOR KEY SHARE OF s),
locked AS (
    SELECT d.id, r.attempt, greatest(CAST(@now AS timestamptz), r.slot) AS started
    FROM webhook_deliveries d JOIN r ON r.id = d.id AND r.tenant = d.tenant_id
    WHERE d.subscription_id IN (SELECT id FROM sub) AND d.status = @pending AND d.claim_id = r.claim
        AND d.sent_claim_id IS DISTINCT FROM d.claim_id
    ORDER BY d.id FOR UPDATE OF d),
taken AS (
    UPDATE webhook_deliveries d SET sent_claim_id = claim_id,
        next_attempt_at = CASE WHEN d.next_attempt_at >= @keep THEN d.next_attempt_at ELSE @lease END,
        attempt_count = attempt_count + 1, claimed_by = @instance, rate_slot_at = NULL
    FROM locked l
    WHERE d.id = l.id
    RETURNING d.id, d.tenant_id, d.subscription_id, d.event_id, d.event_type, d.status, d.attempt_count, d.round_failures,
        d.next_trigger, d.next_attempt_at, d.claim_id, d.sent_claim_id, d.claimed_by, d.last_status_code,
        d.last_error, d.created_at, d.updated_at, d.xmin, l.attempt, l.started),
opened AS (
    INSERT INTO webhook_attempts (id, tenant_id, delivery_id, subscription_id, number, trigger, started_at, duration_ms, result, instance)
    SELECT attempt, tenant_id, id, subscription_id, attempt_count, next_trigger, started, 0, 'in_flight', @instance FROM taken),
abandoned AS (
    UPDATE webhook_attempts a SET result = 'unknown', error_class = 'unknown',
        error = 'the replica sending it stopped before recording the outcome'
    FROM taken t
    WHERE a.delivery_id = t.id AND a.result = 'in_flight' AND a.started_at < @abandoned)
SELECT d.id, d.tenant_id, d.subscription_id, d.event_id, d.event_type, d.status, d.attempt_count,
    d.round_failures, d.next_trigger, d.next_attempt_at, d.claim_id, d.sent_claim_id, d.claimed_by,
    d.last_status_code, d.last_error, d.created_at, d.updated_at, d.xmin, d.attempt, d.started,
    s.url, s.secret, s.previous_secrets, s.headers, s.xmin,
    s.proxy_url, s.tls_client_certificate, s.tls_client_key, s.tls_ca_bundle, s.transform,
    e.type, e.data, e.created_at
FROM taken d
JOIN sub s ON s.id = d.subscription_id
JOIN webhook_events e ON e.tenant_id = d.tenant_id AND e.id = d.event_id
