package notes_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWalkthroughQuotesTheExampleVerbatim keeps docs/adding-a-module.md honest: every code block
// preceded by `<!-- quote: <file> -->` must appear, line for line, in that file of the repository.
func TestWalkthroughQuotesTheExampleVerbatim(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "adding-a-module.md"))
	if err != nil {
		t.Fatal(err)
	}
	quote := regexp.MustCompile("(?s)<!-- quote: (\\S+) -->\\n```[a-z]*\\n(.*?)\\n```")
	matches := quote.FindAllStringSubmatch(string(doc), -1)
	if markers := strings.Count(string(doc), "<!-- quote: "); len(matches) != markers || markers < 8 {
		t.Fatalf("%d quote markers but %d quoted blocks: each marker must sit right above a code fence", markers, len(matches))
	}
	for _, m := range matches {
		file, snippet := m[1], m[2]
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Errorf("the walkthrough quotes %s: %v", file, err)
			continue
		}
		if !strings.Contains(string(src), snippet) {
			first, _, _ := strings.Cut(snippet, "\n")
			t.Errorf("the walkthrough's block from %s starting %q is not in the file", file, first)
		}
	}
}
