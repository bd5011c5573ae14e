package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/admin"
	"github.com/keelson/keelson/platform/auth"
	"github.com/keelson/keelson/platform/database"
)

var (
	errTokensUsage  = errors.New("usage: keelson tokens create --tenant T --scope S [--scope S ...] [--name N] [--expires 30d] | tokens list [--tenant T] | tokens revoke ID")
	errTenantsUsage = errors.New("usage: keelson tenants create NAME | tenants list | tenants disable T | tenants enable T")
)

// repeated collects a flag given several times (--scope a --scope b); commas split too.
type repeated []string

func (r *repeated) String() string { return strings.Join(*r, ",") }

func (r *repeated) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*r = append(*r, s)
		}
	}
	return nil
}

func openStore(ctx context.Context, cfg Config) (*auth.Store, func(), error) {
	db, err := database.Open(ctx, database.Config{URL: cfg.DatabaseURL, TransactionPooling: cfg.DBTransactionPool, MaxOpenConns: 2})
	if err != nil {
		return nil, nil, err
	}
	store, err := auth.NewStore(db)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return store, func() { _ = db.Close() }, nil
}

// tokens creates, lists and revokes API tokens. The token string is printed once, by create.
func tokens(ctx context.Context, cfg Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errTokensUsage
	}
	fs := flag.NewFlagSet("keelson tokens", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tenant := fs.String("tenant", "", "tenant name or id")
	name := fs.String("name", "", "what the token is for")
	expires := fs.String("expires", "", "lifetime: 30d or 720h (default: never)")
	var scopes repeated
	fs.Var(&scopes, "scope", "scope (repeatable): "+auth.ScopeNames())
	if err := fs.Parse(args[1:]); err != nil {
		return errTokensUsage
	}
	store, closeDB, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	switch args[0] {
	case "create":
		if fs.NArg() != 0 || *tenant == "" {
			return errTokensUsage
		}
		lifetime, err := admin.ParseLifetime(*expires)
		if err != nil {
			return err
		}
		tok, secret, err := store.CreateToken(ctx, auth.NewToken{Tenant: *tenant, Name: *name, Scopes: scopes, ExpiresIn: lifetime})
		if err != nil {
			return err
		}
		resp := admin.ToTokenResponse(tok)
		fmt.Fprintf(stdout, "token %s created for tenant %s with scopes %s; it is shown only now:\n%s\n",
			resp.ID, resp.TenantID, strings.Join(resp.Scopes, ","), secret)
		return nil
	case "list":
		if fs.NArg() != 0 {
			return errTokensUsage
		}
		tenantID := uuid.Nil
		if *tenant != "" {
			t, err := store.Tenant(ctx, *tenant)
			if err != nil {
				return err
			}
			tenantID = t.ID
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tTENANT\tNAME\tSCOPES\tCREATED\tLAST USED\tEXPIRES\tREVOKED")
		for after := uuid.Nil; ; {
			page, err := store.ListTokens(ctx, tenantID, after, 500)
			if err != nil {
				return err
			}
			for _, t := range page {
				r := admin.ToTokenResponse(t)
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.TenantID, r.Name, strings.Join(r.Scopes, ","),
					stamp(&r.CreatedAt), stamp(r.LastUsedAt), stamp(r.ExpiresAt), stamp(r.RevokedAt))
			}
			if len(page) < 500 {
				break
			}
			after = page[len(page)-1].ID
		}
		return w.Flush()
	case "revoke":
		if fs.NArg() != 1 {
			return errTokensUsage
		}
		id, err := uuid.Parse(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("tokens revoke: %q is no token id", fs.Arg(0))
		}
		t, err := store.RevokeToken(ctx, uuid.Nil, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "token %s revoked at %s; every replica refuses it within %s\n", t.ID, stamp(t.RevokedAt), auth.DefaultCacheTTL)
		return nil
	}
	return errTokensUsage
}

// tenants creates, lists, disables and enables tenants.
func tenants(ctx context.Context, cfg Config, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] == "list") != (len(args) == 1) || len(args) > 2 {
		return errTenantsUsage
	}
	store, closeDB, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	show := func(t auth.Tenant, err error) error {
		if err != nil {
			return err
		}
		b, _ := json.Marshal(admin.ToTenantResponse(t))
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	name := args[len(args)-1] // the tenant of create, disable and enable (checked above: two arguments)
	switch args[0] {
	case "create":
		return show(store.CreateTenant(ctx, name))
	case "disable":
		return show(store.SetTenantDisabled(ctx, name, true))
	case "enable":
		return show(store.SetTenantDisabled(ctx, name, false))
	case "list":
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tCREATED\tDISABLED")
		for after := uuid.Nil; ; {
			page, err := store.ListTenants(ctx, after, 500)
			if err != nil {
				return err
			}
			for _, t := range page {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.ID, t.Name, stamp(&t.CreatedAt), stamp(t.DisabledAt))
			}
			if len(page) < 500 {
				break
			}
			after = page[len(page)-1].ID
		}
		return w.Flush()
	}
	return errTenantsUsage
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
