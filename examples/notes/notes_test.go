package notes_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/examples/notes"
	"github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/tenancy"
)

type noteBody struct {
	ID             string  `json:"id"`
	ConversationID *string `json:"conversation_id"`
	Title          string  `json:"title"`
	Body           string  `json:"body"`
	WordCount      *int    `json:"word_count"`
	Version        string  `json:"version"`
}

// cluster is the notes module in two replicas, each on its own connection pool, wired by the same
// host package as `keelson serve`, on a fresh database and an isolated exchange. recorder sees
// every event that reached RabbitMQ.
type cluster struct {
	db       *database.DB
	replicas []*hosttest.Replica
	recorder *hosttest.Recorder
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	d := dbtest.Create(t) // platform migrations only: the module's come from the module, as in `keelson migrate`
	db := d.Open(t)
	if err := database.Migrate(context.Background(), db.SQL(),
		[]database.MigrationSet{{Owner: notes.Name, FS: notes.New().Migrations()}}); err != nil {
		t.Fatalf("migrate notes: %v", err)
	}
	c := &cluster{db: db, recorder: &hosttest.Recorder{}}
	broker := hosttest.Broker()
	for i, pool := range []*database.DB{db, d.Open(t)} {
		r := hosttest.Start(t, pool, hosttest.Options{Messaging: broker, Background: true, InstanceID: fmt.Sprintf("notes-%d", i)},
			notes.New(), c.recorder)
		c.replicas = append(c.replicas, r)
	}
	doc := hosttest.Fetch(t, c.replicas[0].URL+"/openapi.json")
	if err := httpapi.CheckOpenAPI(c.replicas[0].Engine, doc); err != nil {
		t.Fatalf("openapi.json does not match the routes: %v", err)
	}
	return c
}

func (c *cluster) get(t *testing.T, id string) (noteBody, string) {
	t.Helper()
	resp := c.replicas[1].Do(t, http.MethodGet, "/api/v1/notes/"+id, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET note: %d %s", resp.Status, resp.Body)
	}
	return hosttest.Decode[noteBody](t, resp), resp.Header.Get("ETag")
}

func TestNotesModuleEndToEnd(t *testing.T) {
	c := startCluster(t)

	resp := c.replicas[0].Do(t, http.MethodPost, "/api/v1/notes", map[string]any{"title": " Groceries ", "body": "eggs milk bread"})
	note := hosttest.Decode[noteBody](t, resp)
	if resp.Status != http.StatusCreated || note.Title != "Groceries" || resp.Header.Get("Location") != "/api/v1/notes/"+note.ID {
		t.Fatalf("create: %d %v %s", resp.Status, resp.Header, resp.Body)
	}
	if etag := resp.Header.Get("ETag"); etag != `"`+note.Version+`"` {
		t.Fatalf("ETag %s does not carry version %s", etag, note.Version)
	}

	// The job counts words in the background, and the event written in the create's transaction reaches RabbitMQ.
	hosttest.Eventually(t, 20*time.Second, func() bool {
		n, _ := c.get(t, note.ID)
		return n.WordCount != nil && *n.WordCount == 3
	}, "the word count job")
	hosttest.Eventually(t, 20*time.Second, func() bool { return len(c.recorder.OfType(notes.EventNoteCreated)) == 1 }, "note.created")
	var changed notes.NoteChanged
	if err := c.recorder.OfType(notes.EventNoteCreated)[0].Decode(&changed); err != nil || changed.NoteID.String() != note.ID {
		t.Fatalf("note.created payload %+v %v", changed, err)
	}

	// The job's Save changed the row, so the version the client holds is stale: 412, nothing written.
	stale := c.replicas[0].Do(t, http.MethodPatch, "/api/v1/notes/"+note.ID, map[string]any{"body": "stale"}, "If-Match", `"`+note.Version+`"`)
	if stale.Status != http.StatusPreconditionFailed {
		t.Fatalf("stale If-Match: %d %s, want 412", stale.Status, stale.Body)
	}
	current, etag := c.get(t, note.ID)
	if current.Body != "eggs milk bread" {
		t.Fatalf("a 412 wrote: %+v", current)
	}

	// Twenty concurrent edits from the same version, spread over both replicas: exactly one wins; the
	// others get 412 (they read the winner's row) or 409 (they passed the check and lost at xmin).
	codes := make(chan int, 20)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.replicas[i%2].Do(t, http.MethodPatch, "/api/v1/notes/"+note.ID, map[string]any{"body": fmt.Sprintf("edit %d", i)}, "If-Match", etag)
			codes <- r.Status
		}()
	}
	wg.Wait()
	close(codes)
	won := 0
	for code := range codes {
		switch code {
		case http.StatusOK:
			won++
		case http.StatusPreconditionFailed, http.StatusConflict:
		default:
			t.Fatalf("concurrent edit answered %d", code)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent edits won, want exactly 1", won)
	}
	hosttest.Eventually(t, 20*time.Second, func() bool {
		n, _ := c.get(t, note.ID)
		return n.WordCount != nil && *n.WordCount == 2
	}, "the recount after the edit")

	// Bad input: 4xx problem+json, nothing written.
	for _, bad := range []struct {
		method, path string
		body         any
		want         int
	}{
		{http.MethodPost, "/api/v1/notes", map[string]any{"body": "no title"}, http.StatusUnprocessableEntity},
		{http.MethodPost, "/api/v1/notes", map[string]any{"title": "x", "colour": "red"}, http.StatusUnprocessableEntity},
		{http.MethodPost, "/api/v1/notes", map[string]any{"title": "   "}, http.StatusUnprocessableEntity},
		{http.MethodPost, "/api/v1/notes", "{", http.StatusBadRequest},
		{http.MethodGet, "/api/v1/notes/not-a-uuid", nil, http.StatusNotFound},
		{http.MethodGet, "/api/v1/notes/" + uuid.NewString(), nil, http.StatusNotFound},
	} {
		r := c.replicas[0].Do(t, bad.method, bad.path, bad.body)
		if p := hosttest.Decode[hosttest.Problem](t, r); r.Status != bad.want || p.Code == "" {
			t.Errorf("%s %s %v: %d %s, want %d problem+json", bad.method, bad.path, bad.body, r.Status, r.Body, bad.want)
		}
	}
	if n := hosttest.Count(t, c.db, "SELECT count(*) FROM notes"); n != 1 {
		t.Fatalf("%d notes after bad input, want 1", n)
	}
}

func TestNotesOpensOneNotePerConversationEvenWhenTheEventIsRepeated(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	conversationID := uuid.New()
	e, err := messaging.NewEvent(tenancy.With(ctx, tenancy.DefaultID), "conversations", contract.EventConversationCreated,
		contract.ConversationCreated{ConversationID: conversationID, Title: "Trip to Lisbon", CreatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	// What the conversations module does, twice with the same event id (a redelivery).
	events := c.replicas[0].Registry.Events
	for range 2 {
		if err := c.db.WithTx(ctx, func(ctx context.Context) error { return events.Publish(ctx, e) }); err != nil {
			t.Fatal(err)
		}
	}
	hosttest.Eventually(t, 20*time.Second, func() bool {
		return hosttest.Count(t, c.db, "SELECT count(*) FROM notes WHERE conversation_id = $1 AND word_count IS NOT NULL", conversationID) == 1
	}, "the note of the conversation, counted")
	// Both copies were consumed (by either replica) and the second was skipped by the inbox.
	hosttest.Eventually(t, 20*time.Second, func() bool {
		return c.handled(t, notes.ConsumerNotes) == 2
	}, "both copies consumed")
	if failed := c.counter(t, "keelson_messages_failed_total", notes.ConsumerNotes); failed != 0 {
		t.Fatalf("%v handler attempts failed, want 0", failed)
	}
	var title string
	if err := c.db.SQL().QueryRow("SELECT title FROM notes WHERE conversation_id = $1", conversationID).Scan(&title); err != nil || title != "Notes on Trip to Lisbon" {
		t.Fatalf("note title %q (%v)", title, err)
	}
	if n := hosttest.Count(t, c.db, "SELECT count(*) FROM notes WHERE conversation_id = $1", conversationID); n != 1 {
		t.Fatalf("%d notes for the conversation, want 1", n)
	}
}

// handled sums a consumer's handled messages over the replicas.
func (c *cluster) handled(t *testing.T, consumer string) float64 {
	return c.counter(t, "keelson_messages_handled_total", consumer)
}

// counter sums one consumer's samples of a counter family over the replicas' registries.
func (c *cluster) counter(t *testing.T, family, consumer string) float64 {
	t.Helper()
	var sum float64
	for _, r := range c.replicas {
		sum += hosttest.Metric(t, r.Metrics, family, "consumer", consumer)
	}
	return sum
}
