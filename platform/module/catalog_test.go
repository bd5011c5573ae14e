package module_test

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
)

type invoiceSent struct {
	InvoiceID uuid.UUID `json:"invoice_id" format:"uuid"`
	Amount    int       `json:"amount" doc:"In cents."`
	SentAt    time.Time `json:"sent_at"`
}

type named string

func (n named) Name() string                    { return string(n) }
func (n named) Migrations() fs.FS               { return nil }
func (n named) Register(*module.Registry) error { return nil }

func register(reg *module.Registry, mod string, events ...module.EventType) {
	reg.For(named(mod)).PublicEvents(events...)
}

func example(t string) module.EventType {
	return module.EventType{Type: t, Description: "An invoice was sent.", Example: invoiceSent{InvoiceID: uuid.New(), Amount: 1200}}
}

func TestTheCatalogCollectsEveryModulesEventsWithASchemaAndOwner(t *testing.T) {
	reg := module.NewRegistry(module.Deps{})
	register(reg, "invoices", example("invoice.sent"), example("invoices.archived"))
	register(reg, "notes", example("note.created"))
	if err := reg.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(reg.Catalog().Types(), ","); got != "invoice.sent,invoices.archived,note.created" {
		t.Fatalf("types %s", got)
	}
	e := reg.Catalog().Entries()[0]
	var schema struct {
		Schema     string                    `json:"$schema"`
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
		Additional *bool                     `json:"additionalProperties"`
	}
	if err := json.Unmarshal(e.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	if e.Owner != "invoices" || schema.Properties["invoice_id"]["format"] != "uuid" ||
		schema.Properties["amount"]["description"] != "In cents." || len(schema.Required) != 3 || schema.Additional != nil {
		t.Fatalf("entry %+v schema %s", e, e.Schema)
	}
	if owner, ok := reg.Catalog().Owner("invoice.anything.else"); !ok || owner != "invoices" {
		t.Fatalf("namespace owner %q %v", owner, ok)
	}
	if _, ok := reg.Catalog().Owner("order.created"); ok {
		t.Fatal("a type in no module's namespace is owned")
	}
}

func TestADuplicateOrForeignEventTypeFailsTheStartClearly(t *testing.T) {
	cases := map[string]struct {
		declare func(reg *module.Registry)
		want    string
	}{
		"duplicate": {func(reg *module.Registry) {
			register(reg, "invoices", example("invoice.sent"))
			register(reg, "invoicess", example("invoice.sent")) // singular of "invoicess" is "invoices"
			register(reg, "invoice", example("invoice.sent"))
		}, `module invoice: event type "invoice.sent": is already declared by module invoices`},
		"outside the prefix": {func(reg *module.Registry) { register(reg, "notes", example("conversation.created")) },
			`module notes: event type "conversation.created": is outside the module's prefix: it must start with "notes." or "note."`},
		"no dot":         {func(reg *module.Registry) { register(reg, "notes", example("note")) }, "at least two"},
		"no description": {func(reg *module.Registry) { register(reg, "notes", module.EventType{Type: "note.x", Example: 1}) }, "one-line description"},
		"no example":     {func(reg *module.Registry) { register(reg, "notes", module.EventType{Type: "note.x", Description: "x"}) }, "example"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg := module.NewRegistry(module.Deps{})
			tc.declare(reg)
			if err := reg.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestASubscriptionToPublicEventsGetsEveryCatalogTypeWhoeverDeclaresItLater(t *testing.T) {
	reg := module.NewRegistry(module.Deps{})
	reg.For(named("webhooks")).SubscribePublicEvents(messaging.Subscription{Consumer: "webhooks.fanout"})
	if len(reg.Subscriptions()) != 0 {
		t.Fatal("an empty catalog still gave a consumer")
	}
	register(reg, "notes", example("note.created"), example("note.edited"))
	subs := reg.Subscriptions()
	if len(subs) != 1 || strings.Join(subs[0].EventTypes, ",") != "note.created,note.edited" {
		t.Fatalf("subscriptions %+v", subs)
	}
}
