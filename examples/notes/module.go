// Package notes is the example module of docs/adding-a-module.md: notes with an xmin row version
// (ETag/If-Match), an integration event published with every write, a background job that counts
// words, and a consumer that opens a note for every new conversation.
package notes

import (
	"embed"
	"io/fs"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/messaging"
	"github.com/keelson/keelson/platform/module"
)

// Name is the module's name: migration owner, event source, consumer prefix, log attribute.
const Name = "notes"

// What the module contributes to the platform.
const (
	EventNoteCreated = "note.created" // integration event, payload NoteChanged
	EventNoteEdited  = "note.edited"  // integration event, payload NoteChanged
	KindCountWords   = "notes.count_words"
	ConsumerNotes    = "notes.conversations"
)

// Events are the module's public integration events: webhook subscribers receive them.
var Events = []module.EventType{
	{Type: EventNoteCreated, Description: "A note was written.", Example: NoteChanged{NoteID: exampleNote, Title: "Groceries"}},
	{Type: EventNoteEdited, Description: "A note's title or body changed.", Example: NoteChanged{NoteID: exampleNote, Title: "Groceries for Sunday"}},
}

var exampleNote = uuid.MustParse("0193a4d4-0a1b-7c2d-8e3f-4a5b6c7d8e9f")

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Module is the notes module.
type Module struct{ service *Service }

// New returns the module; its dependencies arrive with Register.
func New() *Module { return &Module{} }

// Name implements module.Module.
func (m *Module) Name() string { return Name }

// Migrations implements module.Module: the SQL files under migrations/, applied by `keelson migrate`.
func (m *Module) Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern above guarantees the folder exists
	}
	return sub
}

// Service is the application service, available once Register ran.
func (m *Module) Service() *Service { return m.service }

// Register declares the routes, the public events, the job kind and the consumer.
func (m *Module) Register(r *module.Registry) error {
	if err := r.Requires("DB", "Events", "Jobs"); err != nil {
		return err
	}
	m.service = &Service{db: r.DB, events: r.Events, jobs: r.Jobs}
	h := &handlers{service: m.service}
	r.Routes(h.mount)
	r.PublicEvents(Events...)
	r.JobKind(jobs.Kind{Name: KindCountWords, Handle: m.service.countWords,
		Options: jobs.KindOptions{MaxAttempts: 5}})
	r.Subscribe(messaging.Subscription{
		Consumer:   ConsumerNotes,
		EventTypes: []string{contract.EventConversationCreated},
		Handle:     m.service.onConversationCreated,
	})
	return nil
}
