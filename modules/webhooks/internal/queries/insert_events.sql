INSERT INTO webhook_events (id, tenant_id, type, data, created_at)
SELECT id, tenant, type, data, at FROM unnest(CAST(@ids AS text[]), CAST(@tenants AS text[])::uuid[],
    CAST(@types AS text[]), CAST(@data AS text[])::jsonb[], CAST(@ats AS timestamptz[])) AS e(id, tenant, type, data, at)
ORDER BY tenant, id
ON CONFLICT DO NOTHING RETURNING tenant_id, id
