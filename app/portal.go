package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"github.com/keelson/keelson/console"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database"
)

var errPortalLinkUsage = errors.New("usage: keelson portal-link create --tenant T [--name N] [--event-type P ...] [--read-only] [--once] [--expires 24h] | portal-link revoke ID")

// portalLink mints and revokes customer portal links; create prints the link once.
func portalLink(ctx context.Context, cfg Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errPortalLinkUsage
	}
	fs := flag.NewFlagSet("keelson portal-link", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tenant := fs.String("tenant", "", "tenant name or id")
	name := fs.String("name", "", "who the link is for")
	expires := fs.String("expires", "", "lifetime: 30m, 24h or 7d (default 24h, at most 30d)")
	readOnly := fs.Bool("read-only", false, "the customer changes nothing")
	once := fs.Bool("once", false, "the link opens one session only")
	var types repeated
	fs.Var(&types, "event-type", "event type pattern the customer may subscribe to and see (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return errPortalLinkUsage
	}
	db, err := database.Open(ctx, database.Config{URL: cfg.DatabaseURL, TransactionPooling: cfg.DBTransactionPool, MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := auth.NewStore(db)
	if err != nil {
		return err
	}
	links, err := console.NewLinks(db, store, cfg.PortalLinkKeys, cfg.PortalPublicURL)
	if err != nil {
		return err
	}
	switch args[0] {
	case "create":
		if fs.NArg() != 0 || *tenant == "" {
			return errPortalLinkUsage
		}
		lifetime, err := console.ParseLinkLifetime(*expires)
		if err != nil {
			return err
		}
		link, err := links.Create(ctx, console.NewPortalLink{Tenant: *tenant, Name: *name, EventTypes: types,
			ReadOnly: *readOnly, Once: *once, ExpiresIn: lifetime, CreatedBy: "keelson portal-link"})
		if err != nil {
			return err
		}
		rights := "read and write"
		if link.ReadOnly {
			rights = "read-only"
		}
		scope := "every event type"
		if len(link.EventTypes) > 0 {
			scope = strings.Join(link.EventTypes, ",")
		}
		fmt.Fprintf(stdout, "portal link %s for tenant %s (%s, %s) until %s; it is shown only now:\n%s\n",
			link.ID, link.TenantID, rights, scope, stamp(&link.ExpiresAt), link.URL)
		return nil
	case "revoke":
		if fs.NArg() != 1 {
			return errPortalLinkUsage
		}
		id, err := uuid.Parse(fs.Arg(0))
		if err != nil {
			return errPortalLinkUsage
		}
		link, err := links.Revoke(ctx, uuid.Nil, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "portal link %s revoked at %s; its sessions are ended\n", link.ID, stamp(link.RevokedAt))
		return nil
	}
	return errPortalLinkUsage
}
