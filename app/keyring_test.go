package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/secrets"
	"github.com/keelson/keelson/platform/tenancy"
)

const (
	key1 = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	key2 = "k2:ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
)

func box(t *testing.T, spec string) *secrets.Box {
	t.Helper()
	b, err := secrets.Parse(spec)
	require.NoError(t, err)
	return b
}

// serveFor runs serve on d with the keys given: it returns serve's error if it
// refuses to start, or nil once it passed the start-up checks (its key ids are recorded) and stopped.
func serveFor(t *testing.T, d *dbtest.Database, keys string) error {
	t.Helper()
	cfg := testConfig(t, d.URL)
	cfg.Secrets = box(t, keys)
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.InstanceID = "under-test-" + uuid.NewString()[:8]
	db := d.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, hosttest.Logger()) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return err
		case <-time.After(50 * time.Millisecond):
		}
		var recorded int64
		require.NoError(t, db.Gorm().Raw(`SELECT count(*) FROM replica_keyrings WHERE instance_id = ?`, cfg.InstanceID).Scan(&recorded).Error)
		if recorded == 1 {
			cancel()
			require.NoError(t, <-done)
			return nil
		}
	}
	t.Fatalf("serve neither refused nor recorded its key ids within 30s")
	return nil
}

func TestAReplicaWithoutAKeyThatSealedStoredValuesRefusesToStart(t *testing.T) {
	d := dbtest.Create(t, migrations.Sets("webhooks", "conversations", "proposals")...)
	db := d.Open(t)
	id := uuid.New()
	sealed, err := box(t, key2+","+key1).Seal("whsec_c2VhbGVkLXVuZGVyLWsyLWZvci10aGUtc3RhcnQtY2hlY2s=",
		"webhook_subscriptions/"+id.String()+"/secret")
	require.NoError(t, err)
	require.NoError(t, db.Gorm().Exec(`INSERT INTO webhook_subscriptions (id, tenant_id, url, event_types, enabled, secret, headers, created_at, updated_at)
		VALUES (?, ?, 'https://example.com/hook', '["*"]', true, ?, '{}', now(), now())`, id, tenancy.DefaultID, sealed).Error)

	err = serveFor(t, d, key1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "KEELSON_ENCRYPTION_KEYS lacks key(s) k2")
	assert.Contains(t, err.Error(), "webhooks.subscriptions")
	assert.NotContains(t, err.Error(), "MDEy", "the error names key ids, never key material")

	err = serveFor(t, d, "")
	require.Error(t, err, "a replica without keys cannot open sealed values either")
	assert.Contains(t, err.Error(), "lacks key(s) k2")

	require.NoError(t, serveFor(t, d, key1+","+key2), "holding the key as a further one is enough")
	var left int64
	require.NoError(t, db.Gorm().Raw(`SELECT count(*) FROM replica_keyrings`).Scan(&left).Error)
	assert.Zero(t, left, "a replica that stopped cleanly withdrew its key ids")
}

func TestSecretsReencryptRefusesAKeyThatARunningReplicaLacks(t *testing.T) {
	d := dbtest.Create(t, migrations.Sets("webhooks", "conversations", "proposals")...)
	t.Setenv("DATABASE_URL", d.URL)
	t.Setenv("LOG_LEVEL", "error")
	db := d.Open(t)
	require.NoError(t, db.Gorm().Exec(`INSERT INTO webhook_subscriptions (id, tenant_id, url, event_types, enabled, secret, headers, created_at, updated_at)
		VALUES (?, ?, 'https://example.com/hook', '["*"]', true, 'whsec_cGxhaW50ZXh0LWZyb20tYmVmb3JlLWtleXMtd2VyZS1zZXQ=', '{}', now(), now())`,
		uuid.New(), tenancy.DefaultID).Error)
	ctx := context.Background()
	require.NoError(t, secrets.Announce(ctx, db.SQL(), "replica-a", box(t, key1)))
	require.NoError(t, secrets.Announce(ctx, db.SQL(), "replica-b", box(t, key1+","+key2)))

	t.Setenv("KEELSON_ENCRYPTION_KEYS", key2+","+key1)
	var out bytes.Buffer
	err := run(ctx, []string{"secrets", "reencrypt"}, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "replica(s) replica-a do not hold key k2")
	var sealed int64
	require.NoError(t, db.Gorm().Raw(`SELECT count(*) FROM webhook_subscriptions WHERE starts_with(secret, 'v1:')`).Scan(&sealed).Error)
	assert.Zero(t, sealed, "nothing was resealed")

	// The same rule holds for a replica that would start sealing with the key.
	err = serveFor(t, d, key2+","+key1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "seals with key k2, which running replica(s) replica-a do not hold")

	// A replica that stopped refreshing its row (killed) counts no more; one given the key neither.
	require.NoError(t, db.Gorm().Exec(`UPDATE replica_keyrings SET seen_at = now() - interval '1 minute' WHERE instance_id = 'replica-a'`).Error)
	require.NoError(t, secrets.Announce(ctx, db.SQL(), "replica-c", box(t, key1+","+key2)))
	require.NoError(t, run(ctx, []string{"secrets", "reencrypt"}, &out))
	assert.Contains(t, out.String(), "webhooks.subscriptions: 1 row(s) rewritten under key k2")
}
