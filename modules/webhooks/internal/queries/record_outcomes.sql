WITH o AS (
    SELECT * FROM unnest(CAST(@ids AS text[])::uuid[], CAST(@tenants AS text[])::uuid[], CAST(@versions AS int8[]),
        CAST(@statuses AS text[]), CAST(@attempts AS int8[]), CAST(@rounds AS int8[]), CAST(@triggers AS text[]),
        CAST(@nexts AS timestamptz[]), CAST(@claims AS text[])::uuid[], CAST(@claimed_by AS text[]), CAST(@last_codes AS int8[]),
        CAST(@last_errors AS text[]), CAST(@attempt_ids AS text[])::uuid[], CAST(@results AS text[]),
        CAST(@durations AS int8[]), CAST(@codes AS int8[]), CAST(@classes AS text[]), CAST(@errors AS text[]),
        CAST(@excerpts AS text[]), CAST(@headers AS text[])::jsonb[])
    AS o(id, tenant, version, status, attempts, round, trigger, next, claim, claimed_by, last_code, last_error,
        attempt, result, duration, code, class, error, excerpt, headers)),
current AS (
    SELECT d.id FROM webhook_deliveries d JOIN o ON o.id = d.id AND o.tenant = d.tenant_id
    WHERE d.xmin = CAST(CAST(o.version AS text) AS xid)
    ORDER BY d.id FOR UPDATE OF d),
updated AS (
    UPDATE webhook_deliveries d SET status = o.status, attempt_count = o.attempts, round_failures = o.round,
        next_trigger = o.trigger, next_attempt_at = o.next, claim_id = o.claim, claimed_by = o.claimed_by,
        last_status_code = o.last_code, last_error = o.last_error, updated_at = @now
    FROM o JOIN current c ON c.id = o.id
    WHERE d.id = o.id AND d.tenant_id = o.tenant
    RETURNING d.id),
h AS (
    SELECT * FROM unnest(CAST(@subs AS text[])::uuid[], CAST(@succeeded AS bool[]), CAST(@failed AS bool[]),
        CAST(@failures AS int8[]), CAST(@since AS timestamptz[]), CAST(@hung AS bool[])) AS h(sub, succeeded, failed, failures, since, hung)
    WHERE failed OR NOT EXISTS (SELECT 1 FROM webhook_subscription_health fresh WHERE fresh.subscription_id = sub
        AND fresh.consecutive_failures = 0 AND fresh.last_success_at >= @refreshed_after AND fresh.held_until IS NULL)),
health AS (
    INSERT INTO webhook_subscription_health AS sh (subscription_id, last_success_at, last_failure_at, failing_since, consecutive_failures,
        held_until)
    SELECT sub, CASE WHEN succeeded THEN CAST(@now AS timestamptz) END, CASE WHEN failed THEN CAST(@now AS timestamptz) END,
        since, failures, CASE WHEN hung THEN CAST(@hold_until AS timestamptz) END
    FROM h ORDER BY sub
    ON CONFLICT (subscription_id) DO UPDATE SET
        last_success_at = coalesce(excluded.last_success_at, sh.last_success_at),
        last_failure_at = coalesce(excluded.last_failure_at, sh.last_failure_at),
        consecutive_failures = CASE WHEN excluded.last_success_at IS NOT NULL THEN excluded.consecutive_failures
            ELSE sh.consecutive_failures + excluded.consecutive_failures END,
        failing_since = CASE WHEN excluded.last_success_at IS NOT NULL THEN excluded.failing_since
            ELSE coalesce(sh.failing_since, excluded.failing_since) END,
        -- A timeout holds the endpoint (opens the breaker) unless it answered another request meanwhile;
        -- any other outcome ends a hold.
        held_until = CASE WHEN excluded.held_until IS NULL THEN NULL
            WHEN sh.last_success_at IS NULL OR sh.last_success_at < @hung_since THEN excluded.held_until
            ELSE sh.held_until END
    WHERE excluded.last_failure_at IS NOT NULL OR sh.consecutive_failures > 0 OR sh.last_success_at IS NULL
        OR sh.last_success_at < @refreshed_after OR sh.held_until IS NOT NULL
    RETURNING subscription_id, failing_since, consecutive_failures),
closed AS (
    UPDATE webhook_attempts a SET result = CASE WHEN EXISTS (SELECT 1 FROM updated u WHERE u.id = o.id) THEN o.result ELSE 'superseded' END,
        duration_ms = o.duration, status_code = o.code, error_class = o.class, error = o.error,
        response_excerpt = o.excerpt, response_headers = o.headers
    FROM o WHERE a.id = o.attempt AND a.tenant_id = o.tenant
    RETURNING a.id, a.subscription_id, a.result)
SELECT c.id, c.result, hl.failing_since, coalesce(hl.consecutive_failures, 0)
FROM closed c LEFT JOIN health hl ON hl.subscription_id = c.subscription_id
