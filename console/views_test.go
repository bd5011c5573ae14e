package console

import "testing"

func TestPrettyIndentsJsonAndShowsTheCharactersHtmlEscapesStandFor(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":"\u003cb\u003e \u0026"}`, "{\n  \"a\": \"<b> &\"\n}"},
		{`{"a":"\\u003c"}`, "{\n  \"a\": \"\\\\u003c\"\n}"},
		{`{"a":"\u00e9\n"}`, "{\n  \"a\": \"\\u00e9\\n\"\n}"},
		{`not json`, `not json`},
	}
	for _, c := range cases {
		if got := pretty([]byte(c.in)); got != c.want {
			t.Errorf("pretty(%s) = %q, want %q", c.in, got, c.want)
		}
	}
}
