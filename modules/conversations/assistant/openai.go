package assistant

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/keelson/keelson/modules/proposals/contract"
)

// OpenAIConfig configures the OpenAI-compatible adapter (ASSISTANT_BASE_URL, ASSISTANT_MODEL, ASSISTANT_API_KEY).
type OpenAIConfig struct {
	BaseURL string // e.g. https://host/v1; the adapter posts to BaseURL + "/chat/completions"
	Model   string
	APIKey  string        // optional; sent as a bearer token
	Timeout time.Duration // of one request; default 30s
	Client  *http.Client  // optional; its Timeout is replaced by Timeout
}

// OpenAI answers through an OpenAI-compatible chat-completions endpoint; its tool calls become actions.
type OpenAI struct {
	endpoint string
	model    string
	apiKey   string
	client   *http.Client
}

// maxResponseBytes bounds what is read of a response: a reply is small.
const maxResponseBytes = 1 << 20

// NewOpenAI checks the configuration and returns the adapter.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("assistant: base URL %q must start with http:// or https://", cfg.BaseURL)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("assistant: model is required with a base URL")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	client := &http.Client{Timeout: timeout}
	if cfg.Client != nil {
		c := *cfg.Client
		c.Timeout = timeout
		client = &c
	}
	return &OpenAI{endpoint: base + "/chat/completions", model: cfg.Model, apiKey: cfg.APIKey, client: client}, nil
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatRequest struct {
	Model      string        `json:"model"`
	Messages   []chatMessage `json:"messages"`
	Tools      []chatTool    `json:"tools"`
	ToolChoice string        `json:"tool_choice"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
}

// Tools offered to the model: one per action a proposal can carry.
var chatTools = []chatTool{
	{Type: "function", Function: chatFunction{
		Name:        contract.ActionRenameConversation,
		Description: "Propose renaming the current conversation. The user accepts or rejects the proposal.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"title":{"type":"string","minLength":1,"maxLength":200}},"required":["title"],"additionalProperties":false}`),
	}},
	{Type: "function", Function: chatFunction{
		Name:        contract.ActionCreateWebhookSubscription,
		Description: "Propose a webhook subscription delivering events whose type matches a pattern (exact, prefix.* or *) to a URL.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"},"event_types":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["url","event_types"],"additionalProperties":false}`),
	}},
}

// Reply posts the history to the chat-completions endpoint. Transport errors, timeouts and
// non-2xx answers are errors naming the status and an excerpt of the body.
func (o *OpenAI) Reply(ctx context.Context, req Request) (Reply, error) {
	body, err := json.Marshal(o.chatRequest(req))
	if err != nil {
		return Reply{}, fmt.Errorf("assistant: encode request: %w", err)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, o.endpoint, bytes.NewReader(body))
	if err != nil {
		return Reply{}, fmt.Errorf("assistant: build request: %w", err)
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "application/json")
	if o.apiKey != "" {
		httpReq.Header.Set("Authorization", "Bearer "+o.apiKey)
	}
	resp, err := o.client.Do(httpReq)
	if err != nil {
		return Reply{}, fmt.Errorf("assistant: POST %s: %w", o.endpoint, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return Reply{}, fmt.Errorf("assistant: POST %s: status %d: read body: %w", o.endpoint, resp.StatusCode, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Reply{}, fmt.Errorf("assistant: POST %s: status %d: %s", o.endpoint, resp.StatusCode, bodyExcerpt(raw))
	}
	var decoded chatResponse
	if err := json.Unmarshal(raw, &decoded); err != nil {
		return Reply{}, fmt.Errorf("assistant: POST %s: status %d: undecodable body: %w: %s", o.endpoint, resp.StatusCode, err, bodyExcerpt(raw))
	}
	if len(decoded.Choices) == 0 {
		return Reply{}, fmt.Errorf("assistant: POST %s: status %d: no choices: %s", o.endpoint, resp.StatusCode, bodyExcerpt(raw))
	}
	return toReply(decoded), nil
}

func (o *OpenAI) chatRequest(req Request) chatRequest {
	messages := []chatMessage{{Role: "system", Content: fmt.Sprintf(
		"You are the assistant of the conversation titled %q. Answer briefly. When the user wants the "+
			"conversation renamed or webhook events delivered to a URL, call the matching tool: it becomes "+
			"a proposal the user accepts or rejects.", req.ConversationTitle)}}
	for _, t := range req.History {
		role := RoleUser
		if t.Role == RoleAssistant {
			role = RoleAssistant
		}
		messages = append(messages, chatMessage{Role: role, Content: t.Content})
	}
	return chatRequest{Model: o.model, Messages: messages, Tools: chatTools, ToolChoice: "auto"}
}

// toReply keeps the valid tool calls as actions; an invalid one is reported in the rationale, not proposed.
func toReply(resp chatResponse) Reply {
	msg := resp.Choices[0].Message
	var reply Reply
	if msg.Content != nil {
		reply.Text = strings.TrimSpace(*msg.Content)
	}
	var notes []string
	for _, call := range msg.ToolCalls {
		action, err := toAction(call.Function.Name, call.Function.Arguments)
		if err != nil {
			notes = append(notes, fmt.Sprintf("ignored tool call %s: %v", call.Function.Name, err))
			continue
		}
		reply.Actions = append(reply.Actions, action)
		notes = append(notes, "the model called "+call.Function.Name)
	}
	if reply.Text == "" {
		reply.Text = "I have no answer to that."
		if len(reply.Actions) > 0 {
			reply.Text = "I propose the attached change. Accept the proposal to apply it."
		}
	}
	reply.Rationale = reply.Text
	if len(notes) > 0 {
		reply.Rationale = strings.Join(notes, "; ")
		if msg.Content != nil && strings.TrimSpace(*msg.Content) != "" {
			reply.Rationale = strings.TrimSpace(*msg.Content) + " (" + reply.Rationale + ")"
		}
	}
	return reply
}

func toAction(name, arguments string) (Action, error) {
	switch name {
	case contract.ActionRenameConversation:
		var p contract.RenameConversationParams
		if err := strictDecode(arguments, &p); err != nil {
			return Action{}, err
		}
		return RenameAction(p.Title)
	case contract.ActionCreateWebhookSubscription:
		var p contract.CreateWebhookSubscriptionParams
		if err := strictDecode(arguments, &p); err != nil {
			return Action{}, err
		}
		return SubscribeAction(p.URL, p.EventTypes)
	}
	return Action{}, fmt.Errorf("unknown tool %q", name)
}

func strictDecode(arguments string, v any) error {
	dec := json.NewDecoder(strings.NewReader(arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

func bodyExcerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 512 {
		s = strings.ToValidUTF8(s[:512], "") + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
