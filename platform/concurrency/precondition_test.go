package concurrency_test

import (
	"errors"
	"testing"

	"github.com/keelson/keelson/platform/apperr"
	"github.com/keelson/keelson/platform/concurrency"
)

func TestIfMatchIsParsedOnceAndCheckedAgainstTheVersionLoaded(t *testing.T) {
	cases := []struct {
		name   string
		header []string
		ok     bool
	}{
		{"none sent", nil, true},
		{"the current version", []string{`"7"`}, true},
		{"any version", []string{`*`}, true},
		{"one of a list", []string{`"5", "7"`}, true},
		{"one of two headers", []string{`"5"`, `"7"`}, true},
		{"a stale version", []string{`"6"`}, false},
		{"a weak tag", []string{`W/"7"`}, false},
		{"unquoted", []string{`7`}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := concurrency.IfMatch(tc.header...).Check("7")
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, apperr.ErrPreconditionFailed) {
				t.Fatalf("Check = %v, want ok %v", err, tc.ok)
			}
		})
	}
	if err := (concurrency.Precondition{}).Check("1"); err != nil {
		t.Fatalf("the zero precondition refused: %v", err)
	}
}

func TestIfNoneMatchMatchesTheCurrentVersionWeaklyOrAny(t *testing.T) {
	for header, want := range map[string]bool{`"7"`: true, `W/"7"`: true, `"6", "7"`: true, `*`: true, `"6"`: false, ``: false} {
		if got := concurrency.Matches([]string{header}, "7"); got != want {
			t.Errorf("Matches(%q) = %v, want %v", header, got, want)
		}
	}
}

func TestARawSQLConflictIsTheSameTypedConflict(t *testing.T) {
	var ce *concurrency.ConflictError
	err := error(concurrency.NewConflict("webhook_deliveries", "42"))
	if !errors.As(err, &ce) || !errors.Is(err, concurrency.ErrConflict) || ce.Table() != "webhook_deliveries" || ce.Key() != "42" {
		t.Fatalf("conflict %#v", err)
	}
}
