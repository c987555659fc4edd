package schedule

import "testing"

// TestLastWeekdayEveryMonthShape checks LW in every month there can be:
// each length (28, 29, 30, 31 days) starting on each weekday, against
// the definition (the last day that is Monday to Friday).
func TestLastWeekdayEveryMonthShape(t *testing.T) {
	f, ok, err := parseDomForm("LW")
	if err != nil || !ok {
		t.Fatalf("parseDomForm(LW) = %v, %v", ok, err)
	}
	for n := 28; n <= 31; n++ {
		for first := range 7 {
			want := n
			for wd := (first + want - 1) % 7; wd == 0 || wd == 6; wd = (first + want - 1) % 7 {
				want--
			}
			if got := f.day(n, first); got != 1<<want {
				t.Errorf("LW in a %d-day month starting on weekday %d: mask %b, want day %d", n, first, got, want)
			}
		}
	}
}
