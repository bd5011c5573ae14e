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
	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/database/dbtest"
	"github.com/keelson/keelson/platform/host/hosttest"
	"github.com/keelson/keelson/platform/httpapi"
)

type noteBody struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Body      string `json:"body"`
	WordCount *int   `json:"word_count"`
	Version   string `json:"version"`
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
	var changed notes.NoteCreated
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

	// The list pages oldest first: a page of one, then the rest through its cursor.
	second := hosttest.Decode[noteBody](t, c.replicas[0].Do(t, http.MethodPost, "/api/v1/notes", map[string]any{"title": "Second"}))
	type page struct {
		Items      []noteBody `json:"items"`
		NextCursor *string    `json:"next_cursor"`
	}
	first := hosttest.Decode[page](t, c.replicas[1].Do(t, http.MethodGet, "/api/v1/notes?limit=1", nil))
	if len(first.Items) != 1 || first.Items[0].ID != note.ID || first.NextCursor == nil {
		t.Fatalf("first page %+v", first)
	}
	rest := hosttest.Decode[page](t, c.replicas[0].Do(t, http.MethodGet, "/api/v1/notes?limit=1&cursor="+*first.NextCursor, nil))
	if len(rest.Items) != 1 || rest.Items[0].ID != second.ID || rest.NextCursor != nil {
		t.Fatalf("second page %+v", rest)
	}
}
