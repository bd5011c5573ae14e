package assistant

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Usage lists the commands the built-in assistant understands.
const Usage = "Commands: /rename <title>, /subscribe <url> <event-type-pattern>."

// Builtin is the deterministic default assistant: it proposes rename_conversation for
// "/rename <title>", create_webhook_subscription for "/subscribe <url> <pattern>", and otherwise
// acknowledges the message. The same input always gives the same reply.
type Builtin struct{}

// NewBuiltin returns the built-in assistant.
func NewBuiltin() Builtin { return Builtin{} }

// Reply answers the last turn of req.
func (Builtin) Reply(_ context.Context, req Request) (Reply, error) {
	if len(req.History) == 0 {
		return Reply{Text: "Hello. " + Usage}, nil
	}
	content := strings.TrimSpace(req.History[len(req.History)-1].Content)
	command, rest, _ := strings.Cut(content, " ")
	rest = strings.TrimSpace(rest)
	switch command {
	case "/rename":
		action, err := RenameAction(rest)
		if err != nil {
			return Reply{Text: fmt.Sprintf("I cannot rename the conversation: the title %v. Usage: /rename <title>", err)}, nil
		}
		title := strings.TrimSpace(rest)
		return Reply{
			Text:      fmt.Sprintf("I propose renaming this conversation to %q. Accept the proposal to apply it.", title),
			Actions:   []Action{action},
			Rationale: fmt.Sprintf("You asked to rename the conversation to %q.", title),
		}, nil
	case "/subscribe":
		args := strings.Fields(rest)
		if len(args) != 2 {
			return Reply{Text: "Usage: /subscribe <url> <event-type-pattern>"}, nil
		}
		action, err := SubscribeAction(args[0], []string{args[1]})
		if err != nil {
			return Reply{Text: fmt.Sprintf("I cannot propose that subscription: %v. Usage: /subscribe <url> <event-type-pattern>", err)}, nil
		}
		return Reply{
			Text:      fmt.Sprintf("I propose subscribing %s to %s events. Accept the proposal to create it.", args[0], args[1]),
			Actions:   []Action{action},
			Rationale: fmt.Sprintf("You asked for webhook deliveries of %s events to %s.", args[1], args[0]),
		}, nil
	}
	return Reply{Text: fmt.Sprintf("Noted: %q. %s", excerpt(content, 80), Usage)}, nil
}

func excerpt(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max]) + "…"
}
