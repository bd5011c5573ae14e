// Package eventtype is the grammar of event types and of the patterns subscriptions choose them
// by: "a.b" exactly, "a.*" for a prefix, "*" for everything. Ingest validates types with it and
// the fan-out matches with it, so what a subscription can ask for and what an event can be named
// are decided in one place.
package eventtype

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

// Validate checks an event type posted to /events.
func Validate(t string) error {
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

// ValidatePattern checks one subscription pattern: an exact type, "prefix.*" or "*".
func ValidatePattern(p string) error {
	if p == "*" {
		return nil
	}
	if prefix, ok := strings.CutSuffix(p, ".*"); ok {
		p = prefix
	}
	if err := Validate(p); err != nil {
		return fmt.Errorf(`must be an event type, "prefix.*" or "*": %w`, err)
	}
	return nil
}

// NormalizePatterns validates a pattern list and drops duplicates, keeping the order given.
func NormalizePatterns(patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return nil, errors.New("must list at least one event type pattern")
	}
	if len(patterns) > maxPatterns {
		return nil, fmt.Errorf("must list at most %d patterns", maxPatterns)
	}
	seen := make(map[string]bool, len(patterns))
	out := make([]string, 0, len(patterns))
	for i, p := range patterns {
		if err := ValidatePattern(p); err != nil {
			return nil, fmt.Errorf("pattern %d (%q) %w", i, p, err)
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// Matches: "*" matches all; "prefix.*" matches every type starting with "prefix.", deeper ones included.
func Matches(pattern, eventType string) bool {
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(eventType, prefix)
	}
	return pattern == eventType
}

// AnyMatches reports whether a subscription with these patterns wants eventType.
func AnyMatches(patterns []string, eventType string) bool {
	for _, p := range patterns {
		if Matches(p, eventType) {
			return true
		}
	}
	return false
}
