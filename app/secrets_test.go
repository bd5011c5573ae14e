package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/tenancy"
)

func TestSecretsReencryptSealsPlaintextRowsInBatchesAndRefusesToRunWithoutKeys(t *testing.T) {
	d := dbtest.Create(t, migrations.Sets("webhooks")...)
	t.Setenv("DATABASE_URL", d.URL)
	t.Setenv("LOG_LEVEL", "error")
	db := d.Open(t)
	const plaintext = "whsec_cGxhaW50ZXh0LWZyb20tYmVmb3JlLWtleXMtd2VyZS1zZXQ="
	for range 3 {
		require.NoError(t, db.Gorm().Exec(`INSERT INTO webhook_subscriptions (id, tenant_id, url, event_types, enabled, secret, headers, created_at, updated_at)
			VALUES (?, ?, 'https://example.com/hook', '["*"]', true, ?, '{"Authorization":"Bearer plain"}', now(), now())`,
			uuid.New(), tenancy.DefaultID, plaintext).Error)
	}

	err := run(context.Background(), []string{"secrets", "reencrypt"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "KEELSON_ENCRYPTION_KEYS is not set")
	require.ErrorIs(t, run(context.Background(), []string{"secrets", "reencrypt", "--batch", "0"}, &bytes.Buffer{}), errUsage)

	t.Setenv("KEELSON_ENCRYPTION_KEYS", "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"secrets", "reencrypt", "--batch", "2"}, &out))
	require.Contains(t, out.String(), "webhooks.subscriptions: 3 row(s) rewritten under key k1")
	var leaks int64
	require.NoError(t, db.Gorm().Raw(`SELECT count(*) FROM webhook_subscriptions
		WHERE NOT starts_with(secret, 'v1:k1:') OR headers LIKE '%Bearer plain%'`).Scan(&leaks).Error)
	require.Zero(t, leaks)

	out.Reset()
	require.NoError(t, run(context.Background(), []string{"secrets", "reencrypt"}, &out))
	require.True(t, strings.Contains(out.String(), "webhooks.subscriptions: 0 row(s)"), out.String())
}
