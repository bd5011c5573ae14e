package queries

import (
	"database/sql"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type statement interface {
	SQL() string
	Args() []any
}

func TestEveryStatementsParametersAreExactlyItsStructsArgs(t *testing.T) {
	param := regexp.MustCompile(`@([a-z_]+)`)
	for _, s := range []statement{TakeClaims{}, RecordOutcomes{}, InsertEvents{}, CreateDeliveries{}, FanOutTargets{},
		DueDeliveries{}, CountDue{}, PutBacks{}, WaitingDeliveries{}, SameEvent{}} {
		var used []string
		for _, m := range param.FindAllStringSubmatch(s.SQL(), -1) {
			used = append(used, m[1])
		}
		slices.Sort(used)
		used = slices.Compact(used)
		var given []string
		for _, a := range s.Args() {
			given = append(given, a.(sql.NamedArg).Name)
		}
		slices.Sort(given)
		require.Equal(t, used, given, "%T", s)
		require.NotContains(t, s.SQL(), "{{", "%T: every shared fragment filled in", s)
		require.False(t, strings.Contains(s.SQL(), "?"), "%T: named parameters only", s)
	}
}
