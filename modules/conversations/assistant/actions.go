package assistant

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/keelson/keelson/modules/proposals/contract"
)

// MaxTitleLength is the longest conversation title, in characters.
const MaxTitleLength = 200

// RenameAction builds a rename_conversation action after checking the title.
func RenameAction(title string) (Action, error) {
	title = strings.TrimSpace(title)
	if err := CheckTitle(title); err != nil {
		return Action{}, err
	}
	return newAction(contract.ActionRenameConversation, contract.RenameConversationParams{Title: title})
}

// SubscribeAction builds a create_webhook_subscription action after checking the URL and pattern.
func SubscribeAction(rawURL string, eventTypes []string) (Action, error) {
	if err := checkWebhookURL(rawURL); err != nil {
		return Action{}, err
	}
	if len(eventTypes) == 0 {
		return Action{}, errors.New("at least one event type pattern is required")
	}
	for _, p := range eventTypes {
		if strings.TrimSpace(p) == "" || strings.ContainsAny(p, " \t\r\n") || len(p) > 200 {
			return Action{}, fmt.Errorf("invalid event type pattern %q", p)
		}
	}
	return newAction(contract.ActionCreateWebhookSubscription,
		contract.CreateWebhookSubscriptionParams{URL: rawURL, EventTypes: eventTypes})
}

// CheckTitle applies the title rule of the API: 1–200 characters, not blank, no control characters.
func CheckTitle(title string) error {
	switch n := utf8.RuneCountInString(title); {
	case !utf8.ValidString(title):
		return errors.New("must be valid UTF-8")
	case strings.TrimSpace(title) == "":
		return errors.New("must not be empty")
	case n > MaxTitleLength:
		return fmt.Errorf("must be at most %d characters", MaxTitleLength)
	}
	for _, r := range title {
		if r < 0x20 || r == 0x7f {
			return errors.New("must not contain control characters")
		}
	}
	return nil
}

func checkWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid webhook URL %q: want an absolute http(s) URL", raw)
	}
	return nil
}

func newAction(actionType string, params any) (Action, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return Action{}, fmt.Errorf("%s params: %w", actionType, err)
	}
	return Action{Type: actionType, Params: raw}, nil
}
