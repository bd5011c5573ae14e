-- +goose Up
-- An endpoint's outbound path and its payload transformation ('' = none each): its own CONNECT proxy,
-- its client certificate and key for mTLS (the key sealed like the signing secret), the CA bundle it is
-- verified against, and a CEL expression producing the body it is sent.
ALTER TABLE webhook_subscriptions
    ADD COLUMN proxy_url              text NOT NULL DEFAULT '' CHECK (length(proxy_url) <= 2048),
    ADD COLUMN tls_client_certificate text NOT NULL DEFAULT '',
    ADD COLUMN tls_client_key         text NOT NULL DEFAULT '',
    ADD COLUMN tls_ca_bundle          text NOT NULL DEFAULT '',
    ADD COLUMN transform              text NOT NULL DEFAULT '' CHECK (length(transform) <= 4096);

-- +goose Down
ALTER TABLE webhook_subscriptions DROP COLUMN proxy_url, DROP COLUMN tls_client_certificate, DROP COLUMN tls_client_key,
    DROP COLUMN tls_ca_bundle, DROP COLUMN transform;
