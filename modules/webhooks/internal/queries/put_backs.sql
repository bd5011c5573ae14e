WITH r AS (
    SELECT * FROM unnest(CAST(@ids AS text[])::uuid[], CAST(@tenants AS text[])::uuid[], CAST(@claims AS text[])::uuid[],
        CAST(@dues AS timestamptz[]), CAST(@slots AS timestamptz[])) AS r(id, tenant, claim, due, slot)),
locked AS (
    SELECT d.id, r.due, r.slot FROM webhook_deliveries d JOIN r ON r.id = d.id AND r.tenant = d.tenant_id
    WHERE d.status = @pending AND d.claim_id = r.claim AND d.sent_claim_id IS DISTINCT FROM d.claim_id
    ORDER BY d.id FOR UPDATE OF d)
UPDATE webhook_deliveries d SET claim_id = NULL, claimed_by = '', next_attempt_at = l.due, rate_slot_at = l.slot
FROM locked l WHERE d.id = l.id
RETURNING d.id
