package webhooks

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

const (
	maxEventTypeLength = 200
	maxPatterns        = 50
)

// eventTypePattern is a dotted name of letters, digits, "_" and "-" segments, e.g. "proposal.accepted".
var eventTypePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// validateEventType checks an event type posted to /events.
func validateEventType(t string) error {
	if t == "" {
		return errors.New("must not be empty")
	}
	if len(t) > maxEventTypeLength {
		return fmt.Errorf("must be at most %d characters", maxEventTypeLength)
	}
	if !eventTypePattern.MatchString(t) {
		return errors.New(`must be dot-separated segments of letters, digits, "_" or "-"`)
	}
	return nil
}

// validatePattern checks one subscription pattern: an exact type, "prefix.*" or "*".
func validatePattern(p string) error {
	if p == "*" {
		return nil
	}
	if prefix, ok := strings.CutSuffix(p, ".*"); ok {
		p = prefix
	}
	if err := validateEventType(p); err != nil {
		return fmt.Errorf(`must be an event type, "prefix.*" or "*": %w`, err)
	}
	return nil
}

// normalizePatterns validates a pattern list and drops duplicates, keeping the order given.
func normalizePatterns(patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return nil, errors.New("must list at least one event type pattern")
	}
	if len(patterns) > maxPatterns {
		return nil, fmt.Errorf("must list at most %d patterns", maxPatterns)
	}
	seen := make(map[string]bool, len(patterns))
	out := make([]string, 0, len(patterns))
	for i, p := range patterns {
		if err := validatePattern(p); err != nil {
			return nil, fmt.Errorf("pattern %d (%q) %w", i, p, err)
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// patternMatches: "*" matches all; "prefix.*" matches every type starting with "prefix.", deeper ones included.
func patternMatches(pattern, eventType string) bool {
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(eventType, prefix)
	}
	return pattern == eventType
}

// anyPatternMatches reports whether a subscription with these patterns wants eventType.
func anyPatternMatches(patterns []string, eventType string) bool {
	for _, p := range patterns {
		if patternMatches(p, eventType) {
			return true
		}
	}
	return false
}
