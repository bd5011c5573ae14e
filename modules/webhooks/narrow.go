package webhooks

import (
	"strings"

	"github.com/keelson/keelson/modules/webhooks/internal/eventtype"
)

// NormalizePatterns validates subscription event type patterns as the API does and drops duplicates,
// for clients that narrow what others may subscribe to (portal links).
func NormalizePatterns(patterns []string) ([]string, error) {
	return eventtype.NormalizePatterns(patterns)
}

// PatternCovers reports whether every event type that pattern inner matches is matched by outer too.
func PatternCovers(outer, inner string) bool {
	if outer == "*" || outer == inner {
		return true
	}
	prefix, ok := strings.CutSuffix(outer, "*")
	return ok && inner != "*" && strings.HasPrefix(inner, prefix)
}

// PatternMatches reports whether pattern matches eventType, as subscriptions match events.
func PatternMatches(pattern, eventType string) bool {
	return eventtype.Matches(pattern, eventType)
}
