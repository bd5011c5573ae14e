package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/tenancy"
)

func TestATokenIsShownOnceStoredAsAHashAndActsForItsTenantWithItsScopes(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	store, err := NewStore(db)
	require.NoError(t, err)
	tenant, err := store.CreateTenant(ctx, "acme")
	require.NoError(t, err)

	tok, secret, err := store.CreateToken(ctx, NewToken{Tenant: "acme", Name: "ci", Scopes: []string{"webhooks:read", "webhooks:write", "webhooks:read"}})
	require.NoError(t, err)
	assert.Equal(t, []Scope{WebhooksRead, WebhooksWrite}, tok.Scopes, "duplicates are dropped")
	require.True(t, strings.HasPrefix(secret, "kt_"), secret)

	var hash []byte
	var row string
	require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT hash, t::text FROM api_tokens t WHERE id = $1`, tok.ID).Scan(&hash, &row))
	parts := strings.SplitN(secret, "_", 3)
	want := sha256.Sum256([]byte(parts[2]))
	assert.Equal(t, want[:], hash, "only the SHA-256 of the secret is stored")
	assert.NotContains(t, row, parts[2], "the secret itself is stored nowhere in the row")

	a, err := NewAuthenticator(AuthenticatorOptions{DB: db})
	require.NoError(t, err)
	p, err := a.Authenticate(ctx, secret)
	require.NoError(t, err)
	assert.Equal(t, tenant.ID, p.TenantID)
	assert.Equal(t, tok.ID.String(), p.TokenID)
	assert.True(t, p.Has(WebhooksWrite))
	assert.False(t, p.Has(Admin))

	for name, bad := range map[string]string{
		"another secret":  parts[0] + "_" + parts[1] + "_" + strings.Repeat("A", len(parts[2])),
		"no secret":       parts[0] + "_" + parts[1] + "_",
		"a short id":      "kt_1234_" + parts[2],
		"an unknown id":   "kt_0000000000007000800000000000000a_" + parts[2],
		"not a token":     "hello",
		"no token at all": "",
	} {
		_, err := a.Authenticate(ctx, bad)
		assert.ErrorIs(t, err, ErrUnauthenticated, name)
	}
}

func TestLastUsedIsWrittenAtMostOnceAMinute(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	store, _ := NewStore(db)
	tok, secret, err := store.CreateToken(ctx, NewToken{Tenant: tenancy.DefaultName, Scopes: []string{"admin"}})
	require.NoError(t, err)
	a, _ := NewAuthenticator(AuthenticatorOptions{DB: db, CacheTTL: time.Millisecond})
	clock := time.Now()
	a.now = func() time.Time { return clock }
	lastUsed := func() *time.Time {
		a.touches.Wait()
		var at *time.Time
		require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT last_used_at FROM api_tokens WHERE id = $1`, tok.ID).Scan(&at))
		return at
	}

	_, err = a.Authenticate(ctx, secret)
	require.NoError(t, err)
	first := lastUsed()
	require.NotNil(t, first, "the first use is recorded")
	for range 5 {
		clock = clock.Add(5 * time.Second)
		_, err = a.Authenticate(ctx, secret)
		require.NoError(t, err)
	}
	assert.Equal(t, first.UnixMicro(), lastUsed().UnixMicro(), "uses within the minute write nothing")

	// A minute later (in the database's clock too), the next use is recorded.
	_, err = db.SQL().ExecContext(ctx, `UPDATE api_tokens SET last_used_at = last_used_at - interval '61 seconds' WHERE id = $1`, tok.ID)
	require.NoError(t, err)
	clock = clock.Add(61 * time.Second)
	_, err = a.Authenticate(ctx, secret)
	require.NoError(t, err)
	assert.True(t, lastUsed().After(*first), "the use a minute later is recorded")
}

func TestARequestDoesNotWaitForItsLastUseWrite(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	store, _ := NewStore(db)
	_, secret, err := store.CreateToken(ctx, NewToken{Tenant: tenancy.DefaultName, Scopes: []string{"admin"}})
	require.NoError(t, err)
	a, _ := NewAuthenticator(AuthenticatorOptions{DB: db})
	release, started := make(chan struct{}), make(chan struct{})
	a.recordUse = func(context.Context, uuid.UUID) { close(started); <-release } // a write stuck in the database
	done := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(ctx, secret)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Authenticate waited for the last-use write")
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the last-use write never started")
	}
	close(release)
	a.touches.Wait()
}

func TestExpiredRevokedAndDisabledTenantTokensAreRefused(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	store, _ := NewStore(db)
	_, err := store.CreateTenant(ctx, "acme")
	require.NoError(t, err)
	a, _ := NewAuthenticator(AuthenticatorOptions{DB: db, BootstrapTokens: []string{"boot"}})
	clock := time.Now()
	a.now = func() time.Time { return clock }

	_, expiring, err := store.CreateToken(ctx, NewToken{Tenant: "acme", Scopes: []string{"webhooks:read"}, ExpiresIn: time.Hour})
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, expiring)
	require.NoError(t, err)
	clock = clock.Add(time.Hour + time.Second)
	_, err = a.Authenticate(ctx, expiring)
	var failure *Failure
	require.ErrorAs(t, err, &failure)
	assert.Equal(t, "expired", failure.Reason)

	revoked, secret, err := store.CreateToken(ctx, NewToken{Tenant: "acme", Scopes: []string{"webhooks:read"}})
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, secret)
	require.NoError(t, err)
	_, err = store.RevokeToken(ctx, revoked.TenantID, revoked.ID)
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, secret)
	require.NoError(t, err, "within the cache TTL a replica may still accept it")
	clock = clock.Add(DefaultCacheTTL)
	_, err = a.Authenticate(ctx, secret)
	require.ErrorAs(t, err, &failure, "after the cache TTL the revocation holds")
	assert.Equal(t, "revoked", failure.Reason)

	other, err := store.CreateTenant(ctx, "other")
	require.NoError(t, err)
	_, err = store.RevokeToken(ctx, other.ID, revoked.ID)
	assert.ErrorIs(t, err, apperr.ErrNotFound, "another tenant's token is not found")

	_, live, err := store.CreateToken(ctx, NewToken{Tenant: "acme", Scopes: []string{"webhooks:read"}})
	require.NoError(t, err)
	_, err = store.SetTenantDisabled(ctx, "acme", true)
	require.NoError(t, err)
	a.Forget()
	_, err = a.Authenticate(ctx, live)
	assert.ErrorIs(t, err, ErrTenantDisabled)
	_, err = store.SetTenantDisabled(ctx, "acme", false)
	require.NoError(t, err)
	a.Forget()
	_, err = a.Authenticate(ctx, live)
	assert.NoError(t, err, "enabled again, its tokens work again")

	_, err = store.SetTenantDisabled(ctx, tenancy.DefaultName, true)
	require.NoError(t, err)
	a.Forget()
	_, err = a.Authenticate(ctx, "boot")
	assert.ErrorIs(t, err, ErrTenantDisabled, "bootstrap tokens belong to the default tenant")
}

func TestUnknownScopesAndTenantsAreRefusedAndWriteNothing(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	store, _ := NewStore(db)
	cases := map[string]NewToken{
		"unknown scope":   {Tenant: "default", Scopes: []string{"webhooks:read", "webhooks:delete"}},
		"no scope":        {Tenant: "default"},
		"unknown tenant":  {Tenant: "nobody", Scopes: []string{"webhooks:read"}},
		"negative expiry": {Tenant: "default", Scopes: []string{"webhooks:read"}, ExpiresIn: -time.Hour},
	}
	for name, in := range cases {
		_, _, err := store.CreateToken(ctx, in)
		var ve *apperr.ValidationError
		assert.True(t, errors.As(err, &ve) || errors.Is(err, apperr.ErrNotFound), "%s: %v", name, err)
	}
	var n int
	require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT count(*) FROM api_tokens`).Scan(&n))
	assert.Zero(t, n)
	_, err := store.CreateTenant(ctx, "Bad Name")
	assert.Error(t, err)
	_, err = store.CreateTenant(ctx, "default")
	var sc *apperr.StateConflictError
	assert.ErrorAs(t, err, &sc)
}

func TestEnablingADisabledTenantPublishesTenantEnabledOnceEvenWhenTwoReplicasEnableItAtOnce(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Create(t)
	a, err := NewStore(d.Open(t))
	require.NoError(t, err)
	b, err := NewStore(d.Open(t))
	require.NoError(t, err)
	db := d.Open(t)
	published := func(tenant uuid.UUID) int {
		var n int
		require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT count(*) FROM outbox_messages
			WHERE payload->'metadata'->>'event_type' = $1 AND payload->'metadata'->>'tenant_id' = $2`,
			tenancy.EventEnabled, tenant.String()).Scan(&n))
		return n
	}
	acme, err := a.CreateTenant(ctx, "acme")
	require.NoError(t, err)

	_, err = a.SetTenantDisabled(ctx, "acme", false)
	require.NoError(t, err)
	assert.Zero(t, published(acme.ID), "enabling an enabled tenant announces nothing")
	_, err = a.SetTenantDisabled(ctx, "acme", true)
	require.NoError(t, err)
	assert.Zero(t, published(acme.ID), "disabling announces nothing")

	for round := 1; round <= 5; round++ {
		start := make(chan struct{})
		errs := make(chan error, 2)
		for _, s := range []*Store{a, b} {
			go func() {
				<-start
				_, err := s.SetTenantDisabled(ctx, acme.ID.String(), false)
				errs <- err
			}()
		}
		close(start)
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
		require.Equal(t, round, published(acme.ID), "one tenant.enabled per enabling, whichever replica won")
		_, err = b.SetTenantDisabled(ctx, "acme", true)
		require.NoError(t, err)
	}
}

func TestDisablingAndEnablingATenantDoNotWaitForATransactionWritingTheTenantsRows(t *testing.T) {
	d := dbtest.Create(t)
	store, err := NewStore(d.Open(t))
	require.NoError(t, err)
	writer := d.Open(t)
	acme, err := store.CreateTenant(context.Background(), "acme")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := writer.SQL().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	// What the foreign key check of an insert into a tenant-owned table holds until its transaction ends.
	_, err = tx.ExecContext(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR KEY SHARE`, acme.ID)
	require.NoError(t, err)

	for _, disabled := range []bool{true, false} {
		bounded, stop := context.WithTimeout(ctx, 15*time.Second)
		_, err := store.SetTenantDisabled(bounded, acme.ID.String(), disabled)
		stop()
		require.NoError(t, err, "disabled=%t while a transaction writing the tenant's rows is open", disabled)
	}
}

func TestAnUnknownIdIsRememberedUntilATokenWithItIsCreatedHere(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	a, err := NewAuthenticator(AuthenticatorOptions{DB: db, CacheTTL: time.Hour})
	require.NoError(t, err)
	id := uuid.Must(uuid.NewV7())
	secret := "s3cret"
	token := TokenPrefix + strings.ReplaceAll(id.String(), "-", "") + "_" + secret
	_, err = a.Authenticate(ctx, token)
	require.ErrorIs(t, err, ErrUnauthenticated)
	assert.False(t, a.Recognizes(token))

	hash := sha256.Sum256([]byte(secret))
	_, err = db.SQL().ExecContext(ctx, `INSERT INTO api_tokens (id, tenant_id, name, scopes, hash, created_at)
		VALUES ($1, $2, 'late', '{webhooks:read}', $3, now())`, id, tenancy.DefaultID, hash[:])
	require.NoError(t, err)
	_, err = a.Authenticate(ctx, token)
	require.ErrorIs(t, err, ErrUnauthenticated, "the negative cache answers within its TTL")

	a.TokenCreated(id)
	p, err := a.Authenticate(ctx, token)
	require.NoError(t, err, "creating the token here drops it from the negative cache")
	assert.Equal(t, id.String(), p.TokenID)
	assert.True(t, a.Recognizes(token))
	assert.False(t, a.Recognizes(token+"x"), "a wrong secret is not recognized")
}

func TestTheNegativeCacheIsBounded(t *testing.T) {
	a := &Authenticator{ttl: time.Hour, unknown: map[uuid.UUID]time.Time{}}
	now := time.Now()
	for range maxUnknownTokens + 10 {
		a.rememberUnknown(uuid.New(), now)
	}
	assert.LessOrEqual(t, len(a.unknown), maxUnknownTokens)
}
