// Package conversations is the conversations module: conversations and their messages, answered in
// the background by an assistant whose proposed actions become proposals (modules/proposals).
// updated_at is the concurrency token of a conversation; accepted rename proposals are applied here.
package conversations

import (
	"io/fs"
	"time"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/conversations/assistant"
	"github.com/keelson/keelson/modules/conversations/contract"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/module"
)

// ModuleName names the module, its migrations and its event source.
const ModuleName = "conversations"

// Config configures the module. Zero values take the defaults.
type Config struct {
	// Assistant answers messages. Nil: the OpenAI-compatible adapter when OpenAI.BaseURL is set,
	// else the deterministic built-in assistant.
	Assistant assistant.Assistant
	// OpenAI configures the adapter (ASSISTANT_BASE_URL, ASSISTANT_MODEL, ASSISTANT_API_KEY; Timeout default 30s).
	OpenAI assistant.OpenAIConfig
	// HistoryLimit is how many messages the assistant sees; default 50.
	HistoryLimit int
	// ReplyMaxAttempts bounds the attempts of one reply job; default 5.
	ReplyMaxAttempts int
	// ReplyTimeout is the deadline of one reply attempt; default the assistant timeout + 15s.
	ReplyTimeout time.Duration
}

// Module is the conversations module.
type Module struct {
	assistant    assistant.Assistant
	historyLimit int
	maxAttempts  int
	replyTimeout time.Duration
	service      *Service
}

// New checks cfg and builds the module.
func New(cfg Config) (*Module, error) {
	m := &Module{assistant: cfg.Assistant, historyLimit: cfg.HistoryLimit, maxAttempts: cfg.ReplyMaxAttempts, replyTimeout: cfg.ReplyTimeout}
	assistantTimeout := cfg.OpenAI.Timeout
	if assistantTimeout <= 0 {
		assistantTimeout = 30 * time.Second
	}
	if m.assistant == nil {
		m.assistant = assistant.NewBuiltin()
		if cfg.OpenAI.BaseURL != "" {
			ai, err := assistant.NewOpenAI(cfg.OpenAI)
			if err != nil {
				return nil, err
			}
			m.assistant = ai
		}
	}
	if m.historyLimit <= 0 {
		m.historyLimit = 50
	}
	if m.maxAttempts <= 0 {
		m.maxAttempts = 5
	}
	if m.replyTimeout <= 0 {
		m.replyTimeout = assistantTimeout + 15*time.Second
	}
	return m, nil
}

// Name implements module.Module.
func (m *Module) Name() string { return ModuleName }

// Migrations implements module.Module.
func (m *Module) Migrations() fs.FS { return migrations.For(ModuleName) }

// Service is the application service, for in-process callers (tests, other wiring); set by Register.
func (m *Module) Service() *Service { return m.service }

// Register mounts the routes, the reply job kind and the consumer of accepted proposals.
func (m *Module) Register(r *module.Registry) error {
	if err := r.Requires("DB", "Events", "Jobs", "Logger"); err != nil {
		return err
	}
	m.service = newService(r.DB, r.Events, r.Jobs)
	h := &handlers{service: m.service}
	r.Routes(h.mount)
	r.PublicEvents(contract.Events...)
	rep := &replier{service: m.service, assistant: m.assistant, history: m.historyLimit}
	r.JobKind(jobs.Kind{Name: KindAssistantReply, Handle: rep.handle,
		Options: jobs.KindOptions{MaxAttempts: m.maxAttempts, Timeout: m.replyTimeout}})
	applier := &proposalApplier{service: m.service, logger: r.Logger}
	r.Subscribe(applier.subscription())
	return nil
}
