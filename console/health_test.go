package console

import (
	"strings"
	"testing"
	"time"
)

func TestHourSlotsStayOnTheChartEvenForATimeAfterNow(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		at   time.Time
		want int
	}{
		{now, 23}, {now.Add(2 * time.Second), 23}, {now.Add(3 * time.Hour), 23},
		{now.Add(-90 * time.Minute), 22}, {now.Add(-23*time.Hour - 59*time.Minute), 0}, {now.Add(-40 * time.Hour), 0},
	} {
		if got := hourSlot(now, c.at); got != c.want {
			t.Errorf("hourSlot(now%+v) = %d, want %d", c.at.Sub(now), got, c.want)
		}
	}
}

func TestTheChartHoldsOnlyNumbersAndNamesItsRate(t *testing.T) {
	var b [24]hourBucket
	b[23] = hourBucket{ok: 3, failed: 1}
	b[0] = hourBucket{failed: 2}
	svg := string(chart(b, health{Succeeded: 3, Failed: 3, Unit: "attempts"}))
	for _, want := range []string{`aria-label="50% of 6 finished attempts succeeded in the last 24 hours"`, `class="ok"`, `class="bad"`, `class="none"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %s:\n%s", want, svg)
		}
	}
	if strings.Count(svg, "<rect") != 22+1+2 {
		t.Errorf("chart has %d bars, want 22 empty, 1 for the failed-only hour and 2 for the mixed one", strings.Count(svg, "<rect"))
	}
}
