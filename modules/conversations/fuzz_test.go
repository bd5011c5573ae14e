package conversations_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/conversations"
	"github.com/keelson/keelson/modules/proposals"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
)

func FuzzPostMessageNeverAnswers5xx(f *testing.F) {
	conv, err := conversations.New(conversations.Config{})
	if err != nil {
		f.Fatal(err)
	}
	db := dbtest.Create(f, migrations.Sets("conversations", "proposals")...).Open(f)
	api := hosttest.Start(f, db, hosttest.Options{}, conv, proposals.New())
	created := api.Do(f, http.MethodPost, "/api/v1/conversations", map[string]string{"title": "fuzz"})
	if created.Status != http.StatusCreated {
		f.Fatalf("create conversation: %d %s", created.Status, created.Body)
	}
	id := hosttest.Decode[struct {
		ID string `json:"id"`
	}](f, created).ID

	f.Add([]byte(`{"content":"hello"}`))
	f.Add([]byte(`{"content":"/rename New title"}`))
	f.Add([]byte(`{"content":"żółw 🐢 \ud83d\ude00"}`))
	f.Add([]byte(`{"content":""}`))
	f.Add([]byte(`{"content":"a\u0000b"}`))
	f.Add([]byte(`{"content":"/rename \ud800"}`))
	f.Add([]byte("{\"content\":\"\xff\"}"))
	f.Add([]byte(`{"content":1e1000000}`))
	f.Add([]byte(`{"content":` + strings.Repeat("[", httpapi.MaxJSONDepth+1) + strings.Repeat("]", httpapi.MaxJSONDepth+1) + `}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res := api.Do(t, http.MethodPost, "/api/v1/conversations/"+id+"/messages", body)
		if res.Status >= 500 {
			t.Fatalf("POST /conversations/{id}/messages %q answered %d: %s", body, res.Status, res.Body)
		}
	})
}
