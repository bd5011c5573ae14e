package concurrency

import (
	"fmt"
	"strings"

	"github.com/keelson/keelson/platform/apperr"
)

// Precondition is a client's If-Match, parsed once at the edge and handed to the service, which
// checks it against the version it loads inside the unit of work. The zero value accepts any version.
type Precondition struct {
	header string   // as sent, for the error message
	tags   []string // strong entity tags, quotes included; "*" matches any
}

// IfMatch parses the values of If-Match headers ("a", "b" or a comma-separated list).
func IfMatch(values ...string) Precondition {
	var p Precondition
	for _, v := range values {
		for tag := range strings.SplitSeq(v, ",") {
			if tag = strings.TrimSpace(tag); tag != "" {
				p.tags = append(p.tags, tag)
			}
		}
	}
	p.header = strings.Join(values, ", ")
	return p
}

// Check accepts the current version when no If-Match was sent, or "*" or the strong tag "<version>" was
// listed; anything else (weak W/"v" tags included) is apperr.ErrPreconditionFailed.
func (p Precondition) Check(currentVersion string) error {
	if p.header == "" {
		return nil
	}
	want := `"` + currentVersion + `"`
	for _, tag := range p.tags {
		if tag == "*" || tag == want {
			return nil
		}
	}
	return fmt.Errorf("%w: If-Match %q, current version %q", apperr.ErrPreconditionFailed, p.header, currentVersion)
}

// Matches reports whether a conditional read's If-None-Match lists the current version ("*" included):
// the client's copy is fresh and the answer is 304 Not Modified. Weak comparison, as RFC 9110 asks.
func Matches(ifNoneMatch []string, currentVersion string) bool {
	want := `"` + currentVersion + `"`
	for _, tag := range IfMatch(ifNoneMatch...).tags {
		if tag == "*" || strings.TrimPrefix(tag, "W/") == want {
			return true
		}
	}
	return false
}
