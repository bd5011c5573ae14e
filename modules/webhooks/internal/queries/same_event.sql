SELECT type = @type AND data = CAST(@data AS jsonb) FROM webhook_events WHERE tenant_id = @tenant AND id = @id
