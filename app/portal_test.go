package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/database/dbtest"
)

func TestThePortalLinkCommandMintsALinkOnceAndRevokesIt(t *testing.T) {
	d := dbtest.Create(t)
	t.Setenv("DATABASE_URL", d.URL)
	t.Setenv("LOG_LEVEL", "error")
	t.Setenv("PORTAL_PUBLIC_URL", "https://webhooks.example.com")
	ctx := context.Background()
	keelson := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, &out)
		return out.String(), err
	}
	_, err := keelson("tenants", "create", "acme")
	require.NoError(t, err)

	_, err = keelson("portal-link", "create", "--tenant", "acme")
	var sce *apperr.StateConflictError
	assert.ErrorAs(t, err, &sce, "without PORTAL_LINK_KEY no link is minted")

	t.Setenv("PORTAL_LINK_KEY", "a-portal-link-key-of-at-least-32-bytes!")
	out, err := keelson("portal-link", "create", "--tenant", "acme", "--name", "Acme Ltd", "--event-type", "order.*",
		"--read-only", "--once", "--expires", "2d")
	require.NoError(t, err, out)
	assert.Contains(t, out, "read-only, order.*")
	link := regexp.MustCompile(`https://webhooks\.example\.com/console/portal/[A-Za-z0-9_-]{64}`).FindString(out)
	require.NotEmpty(t, link, out)
	id := regexp.MustCompile(`portal link ([0-9a-f-]{36})`).FindStringSubmatch(out)[1]

	_, err = keelson("portal-link", "create", "--tenant", "acme", "--expires", "31d")
	var ve *apperr.ValidationError
	assert.ErrorAs(t, err, &ve, "a lifetime beyond 30 days is refused")
	_, err = keelson("portal-link", "create")
	assert.ErrorIs(t, err, errUsage, "a tenant is required")

	out, err = keelson("portal-link", "revoke", id)
	require.NoError(t, err, out)
	assert.Contains(t, out, "revoked")
	_, err = keelson("portal-link", "revoke", "0193a000-0000-7000-8000-000000000000")
	assert.ErrorIs(t, err, apperr.ErrNotFound)
}

func TestAShortPortalLinkKeyIsRefusedAtStart(t *testing.T) {
	_, err := LoadConfig(func(name string) string {
		if name == "PORTAL_LINK_KEY" {
			return "too-short"
		}
		return ""
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PORTAL_LINK_KEY")
	_, err = LoadConfig(func(name string) string {
		if name == "PORTAL_FRAME_ANCESTORS" {
			return "https://app.example.com/path"
		}
		return ""
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PORTAL_FRAME_ANCESTORS")
}
