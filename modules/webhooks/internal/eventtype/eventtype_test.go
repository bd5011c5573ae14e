package eventtype

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPatternsMatchExactTypesPrefixesAndEverything(t *testing.T) {
	for _, tc := range []struct {
		pattern, eventType string
		match              bool
	}{
		{"*", "conversation.created", true},
		{"conversation.created", "conversation.created", true},
		{"conversation.created", "conversation.renamed", false},
		{"conversation.*", "conversation.created", true},
		{"conversation.*", "conversation.message.created", true},
		{"conversation.*", "conversation", false},
		{"conversation.*", "conversations.created", false},
		{"proposal.*", "conversation.created", false},
		{"conversation.message.*", "conversation.message.created", true},
		{"conversation.message.*", "conversation.created", false},
	} {
		require.Equal(t, tc.match, Matches(tc.pattern, tc.eventType), "%q vs %q", tc.pattern, tc.eventType)
	}
}

func TestPatternSyntaxIsValidated(t *testing.T) {
	for _, p := range []string{"*", "a", "a.b", "a.*", "a.b.*", "A_b-c.d"} {
		require.NoError(t, ValidatePattern(p), p)
	}
	for _, p := range []string{"", " ", "a.", ".a", "a..b", "a.*.b", "*.a", "a*", "**", "a.**", "a b", "a/b", "é"} {
		require.Error(t, ValidatePattern(p), p)
	}
	_, err := NormalizePatterns(nil)
	require.Error(t, err)
	got, err := NormalizePatterns([]string{"a.*", "b", "a.*"})
	require.NoError(t, err)
	require.Equal(t, []string{"a.*", "b"}, got)
}
