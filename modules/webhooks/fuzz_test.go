package webhooks_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/webhooks"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
)

// unstorableSeeds are bodies PostgreSQL or the signer cannot hold; each must be a 4xx, never a 5xx.
func unstorableSeeds(f *testing.F, field string) {
	deep := strings.Repeat("[", httpapi.MaxJSONDepth+1) + strings.Repeat("]", httpapi.MaxJSONDepth+1)
	for _, v := range []string{`"a\u0000b"`, `"\ud800"`, `"\udfff x"`, "\"\xff\xfe\"", `1e1000000`, `-1e-1000000`,
		`{"n":1e309}`, deep, `{"k\u0000":1}`, `[1,2,"\ud83d"]`} {
		f.Add([]byte(`{"` + field + `":` + v + `}`))
	}
}

func startWebhooks(f *testing.F) *hosttest.Replica {
	cfg := webhooks.DefaultConfig()
	cfg.AllowPrivateTargets = true
	mod, err := webhooks.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	db := dbtest.Create(f, migrations.Sets(webhooks.Name)...).Open(f)
	return hosttest.Start(f, db, hosttest.Options{}, mod)
}

func FuzzPublishEventNeverAnswers5xx(f *testing.F) {
	api := startWebhooks(f)
	f.Add([]byte(`{"type":"order.created","data":{"order_id":42,"items":[{"sku":"a","qty":1.5}]}}`))
	f.Add([]byte(`{"id":"evt_1","type":"order.created","data":{"note":"żółw 🐢 \ud83d\ude00"}}`))
	f.Add([]byte(`{"type":"order.created","data":[]}`))
	f.Add([]byte(`{"type":"","data":{}}`))
	unstorableSeeds(f, "data")
	f.Add([]byte(`{"type":"order.created","data":{"x":"\u0000"}}`))
	f.Add([]byte(`{"type":"a\u0000b","data":{}}`))
	f.Add([]byte(`{"id":"\ud800","type":"t","data":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res := api.Do(t, http.MethodPost, "/api/v1/webhooks/events", body)
		if res.Status >= 500 {
			t.Fatalf("POST /webhooks/events %q answered %d: %s", body, res.Status, res.Body)
		}
	})
}

func FuzzCreateSubscriptionNeverAnswers5xx(f *testing.F) {
	api := startWebhooks(f)
	f.Add([]byte(`{"url":"http://127.0.0.1:9/hooks","event_types":["order.*"],"description":"orders"}`))
	f.Add([]byte(`{"url":"http://127.0.0.1:9/hooks","event_types":["*"],"enabled":false,"secret":"whsec_a2VlbHNvbi1kZW1vLXNlY3JldC1kby1ub3QtcmV1c2U="}`))
	f.Add([]byte(`{"url":"ftp://x","event_types":[]}`))
	f.Add([]byte(`{"url":"http://127.0.0.1:9/h","event_types":["*"],"filter":"data.amount > 100 && data.currency == \"EUR\""}`))
	f.Add([]byte(`{"url":"http://127.0.0.1:9/h","event_types":["*"],"filter":"data.amount >"}`))
	unstorableSeeds(f, "description")
	unstorableSeeds(f, "filter")
	f.Add([]byte(`{"url":"http://127.0.0.1:9/h\u0000","event_types":["a"]}`))
	f.Add([]byte(`{"url":"http://127.0.0.1:9/h","event_types":["a\ud800"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res := api.Do(t, http.MethodPost, "/api/v1/webhooks/subscriptions", body)
		if res.Status >= 500 {
			t.Fatalf("POST /webhooks/subscriptions %q answered %d: %s", body, res.Status, res.Body)
		}
	})
}
