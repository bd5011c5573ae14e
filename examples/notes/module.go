// Package notes is the example module of docs/adding-a-module.md: a table with an xmin row version
// (ETag/If-Match), typed routes, one public event per new note, and a job that counts a note's words.
package notes

import (
	"embed"
	"io/fs"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/module"
)

// Name is the module's name: migration owner, event source, log attribute.
const Name = "notes"

const (
	EventNoteCreated = "note.created"      // public integration event, payload NoteCreated
	KindCountWords   = "notes.count_words" // background job, payload countWordsJob
)

// Events are the module's public integration events: webhook subscribers receive them.
var Events = []module.EventType{{Type: EventNoteCreated, Description: "A note was written.",
	Example: NoteCreated{NoteID: uuid.MustParse("0193a4d4-0a1b-7c2d-8e3f-4a5b6c7d8e9f"), Title: "Groceries"}}}

// NoteCreated is the payload of note.created.
type NoteCreated struct {
	NoteID uuid.UUID `json:"note_id" format:"uuid"`
	Title  string    `json:"title"`
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Module is the notes module; its dependencies arrive with Register.
type Module struct{}

func New() *Module { return &Module{} }

func (*Module) Name() string { return Name }

// Migrations implements module.Module: the SQL files under migrations/, applied by `keelson migrate`.
func (*Module) Migrations() fs.FS {
	sub, _ := fs.Sub(migrationFiles, "migrations") // fails only for an invalid path, and this one is valid
	return sub
}

// Register declares the routes, the public event and the job kind.
func (*Module) Register(r *module.Registry) error {
	if err := r.Requires("DB", "Events", "Jobs"); err != nil {
		return err
	}
	s := &Service{db: r.DB, events: r.Events, jobs: r.Jobs}
	r.Routes(s.mount)
	r.PublicEvents(Events...)
	r.JobKind(jobs.Kind{Name: KindCountWords, Handle: s.countWords, Options: jobs.KindOptions{MaxAttempts: 5}})
	return nil
}
