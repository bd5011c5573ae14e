package notes_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/keelson/keelson/examples/notes"
	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/webhooks"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
)

// The catalog is the only link: the webhooks module knows nothing of notes, yet a note.* subscriber
// receives note.created.
func TestANoteCreatedReachesANoteSubscriberWithNoChangeToTheWebhooksModule(t *testing.T) {
	d := dbtest.Create(t, migrations.Sets(webhooks.Name)...)
	db := d.Open(t)
	if err := database.Migrate(context.Background(), db.SQL(),
		[]database.MigrationSet{{Owner: notes.Name, FS: notes.New().Migrations()}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var received []map[string]any
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		received = append(received, body)
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	cfg := webhooks.DefaultConfig()
	cfg.AllowPrivateTargets = true
	wh, err := webhooks.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := hosttest.Start(t, db, hosttest.Options{Background: true}, notes.New(), wh)

	sub := r.Do(t, http.MethodPost, "/api/v1/webhooks/subscriptions", map[string]any{"url": receiver.URL, "event_types": []string{"note.*"}})
	if sub.Status != http.StatusCreated || json.Valid(sub.Body) && hosttest.Decode[map[string]any](t, sub)["warnings"] != nil {
		t.Fatalf("subscribe: %d %s", sub.Status, sub.Body)
	}
	created := r.Do(t, http.MethodPost, "/api/v1/notes", map[string]any{"title": "Groceries", "body": "eggs"})
	if created.Status != http.StatusCreated {
		t.Fatalf("create note: %d %s", created.Status, created.Body)
	}
	id := hosttest.Decode[noteBody](t, created).ID
	hosttest.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range received {
			if data, ok := b["data"].(map[string]any); ok && b["type"] == notes.EventNoteCreated && data["note_id"] == id {
				return true
			}
		}
		return false
	}, "note.created delivered to the note.* subscriber")
}
