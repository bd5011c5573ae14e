-- +goose Up
-- Rotated-out secrets become a list, each sealed like the secret and with its own expiry, so a second
-- rotation does not cut off the one before. The earliest expiry is kept beside the list: the schedule
-- that wipes expired ones finds its rows by index.
ALTER TABLE webhook_subscriptions
    ADD COLUMN previous_secrets           jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(previous_secrets) = 'array'),
    ADD COLUMN previous_secrets_expire_at timestamptz;
UPDATE webhook_subscriptions
SET previous_secrets = jsonb_build_array(jsonb_build_object('secret', previous_secret, 'expires_at', previous_secret_expires_at)),
    previous_secrets_expire_at = previous_secret_expires_at
WHERE previous_secret <> '' AND previous_secret_expires_at > now() AND deleted_at IS NULL;
-- A deleted subscription keeps no secret and no header value.
UPDATE webhook_subscriptions SET secret = '', headers = '{}' WHERE deleted_at IS NOT NULL AND (secret <> '' OR headers <> '{}');
ALTER TABLE webhook_subscriptions DROP COLUMN previous_secret, DROP COLUMN previous_secret_expires_at;
CREATE INDEX webhook_subscriptions_previous_secrets_expire ON webhook_subscriptions (previous_secrets_expire_at)
    WHERE previous_secrets_expire_at IS NOT NULL;

-- +goose Down
DROP INDEX webhook_subscriptions_previous_secrets_expire;
ALTER TABLE webhook_subscriptions
    ADD COLUMN previous_secret            text NOT NULL DEFAULT '',
    ADD COLUMN previous_secret_expires_at timestamptz;
UPDATE webhook_subscriptions
SET previous_secret = previous_secrets->0->>'secret',
    previous_secret_expires_at = (previous_secrets->0->>'expires_at')::timestamptz
WHERE jsonb_array_length(previous_secrets) > 0;
ALTER TABLE webhook_subscriptions DROP COLUMN previous_secrets, DROP COLUMN previous_secrets_expire_at;
