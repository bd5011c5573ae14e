INSERT INTO webhook_deliveries (id, tenant_id, subscription_id, event_id, event_type, status,
    next_trigger, next_attempt_at, claim_id, claimed_by, created_at, updated_at)
SELECT id, tenant, sub, event, type, @status, @trigger,
    CASE WHEN claim = '' THEN CAST(@at AS timestamptz) ELSE CAST(@lease AS timestamptz) END, CAST(NULLIF(claim, '') AS uuid),
    CASE WHEN claim = '' THEN '' ELSE CAST(@by AS text) END, @at, @at
FROM unnest(CAST(@ids AS text[])::uuid[], CAST(@tenants AS text[])::uuid[], CAST(@subs AS text[])::uuid[],
    CAST(@events AS text[]), CAST(@types AS text[]), CAST(@claims AS text[])) AS r(id, tenant, sub, event, type, claim)
