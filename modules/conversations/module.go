// Package conversations is the conversations module: conversations and their messages, answered in
// the background by an assistant whose proposed actions become proposals (modules/proposals).
// updated_at is the concurrency token of a conversation; accepted rename proposals are applied here.
package conversations

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/keelson/keelson/migrations"
	"github.com/keelson/keelson/modules/conversations/assistant"
	"github.com/keelson/keelson/platform/jobs"
	"github.com/keelson/keelson/platform/module"
)

// ModuleName names the module, its migrations and its event source.
const ModuleName = "conversations"

//go:embed openapi.json
var openAPI []byte

// Config configures the module. Zero values take the defaults.
type Config struct {
	// Assistant answers messages. Nil: the OpenAI-compatible adapter when OpenAI.BaseURL is set,
	// else the deterministic built-in assistant.
	Assistant assistant.Assistant
	// OpenAI configures the adapter (ASSISTANT_BASE_URL, ASSISTANT_MODEL, ASSISTANT_API_KEY, ASSISTANT_TIMEOUT).
	OpenAI assistant.OpenAIConfig
	// HistoryLimit is how many messages the assistant sees; default 50.
	HistoryLimit int
	// ReplyMaxAttempts bounds the attempts of one reply job; default 5.
	ReplyMaxAttempts int
	// ReplyTimeout is the deadline of one reply attempt; default the assistant timeout + 15s.
	ReplyTimeout time.Duration
}

// ConfigFromEnv reads the ASSISTANT_* variables with getenv (os.Getenv in production).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{OpenAI: assistant.OpenAIConfig{
		BaseURL: strings.TrimSpace(getenv("ASSISTANT_BASE_URL")),
		Model:   strings.TrimSpace(getenv("ASSISTANT_MODEL")),
		APIKey:  getenv("ASSISTANT_API_KEY"),
	}}
	if raw := strings.TrimSpace(getenv("ASSISTANT_TIMEOUT")); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("ASSISTANT_TIMEOUT: invalid duration %q", raw)
		}
		cfg.OpenAI.Timeout = d
	}
	if cfg.OpenAI.BaseURL == "" && (cfg.OpenAI.Model != "" || cfg.OpenAI.APIKey != "") {
		return Config{}, errors.New("ASSISTANT_BASE_URL: required when ASSISTANT_MODEL or ASSISTANT_API_KEY is set")
	}
	if cfg.OpenAI.BaseURL != "" {
		if _, err := assistant.NewOpenAI(cfg.OpenAI); err != nil {
			return Config{}, fmt.Errorf("ASSISTANT_BASE_URL/ASSISTANT_MODEL: %w", err)
		}
	}
	return cfg, nil
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
	switch {
	case r.DB == nil:
		return errors.New("conversations: nil DB")
	case r.Events == nil:
		return errors.New("conversations: nil Events")
	case r.Jobs == nil:
		return errors.New("conversations: nil Jobs")
	case r.Logger == nil:
		return errors.New("conversations: nil Logger")
	}
	m.service = newService(r.DB, r.Events, r.Jobs)
	h := &handlers{service: m.service}
	r.Routes(h.mount)
	rep := &replier{service: m.service, assistant: m.assistant, history: m.historyLimit}
	r.JobKind(jobs.Kind{Name: KindAssistantReply, Handle: rep.handle,
		Options: jobs.KindOptions{MaxAttempts: m.maxAttempts, Timeout: m.replyTimeout}})
	applier := &proposalApplier{service: m.service, logger: r.Logger}
	r.Subscribe(applier.subscription())
	r.OpenAPI(openAPI)
	return nil
}
