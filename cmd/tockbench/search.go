package main

// Phases of the ceiling search, as reported per step.
const (
	phaseRamp   = "ramp"
	phaseBisect = "bisect"
)

// rateSearch finds the highest rate (executions per second) a cluster
// keeps up with: a ramp from start in steps of step, up to max, that ends
// at the first rate not kept up with; then bisection between the highest
// rate kept up with and the lowest not, until the two are within
// precision. It holds no I/O, so its walk is tested on its own; next and
// record alternate.
type rateSearch struct {
	start, max, step, precision int

	// good is the highest rate kept up with so far, 0 if none; bad the
	// lowest not kept up with, 0 if none.
	good, bad int
	tried     bool
}

// next is the rate of the next step and its phase; ok is false when the
// search is over.
func (s *rateSearch) next() (rate int, phase string, ok bool) {
	switch {
	case !s.tried:
		return s.start, phaseRamp, true
	case s.bad == 0:
		if s.good >= s.max {
			return 0, "", false
		}
		return min(s.good+s.step, s.max), phaseRamp, true
	case s.bad-s.good <= s.precision:
		return 0, "", false
	default:
		// good < mid < bad, since bad - good > precision >= 1.
		return s.good + (s.bad-s.good)/2, phaseBisect, true
	}
}

// record is the outcome of a step at rate. A rate kept up with raises
// good; one that was not lowers bad. A noisy outcome below good or above
// bad cannot happen: steps only go between them.
func (s *rateSearch) record(rate int, keptUp bool) {
	s.tried = true
	switch {
	case keptUp && rate > s.good:
		s.good = rate
	case !keptUp && (s.bad == 0 || rate < s.bad):
		s.bad = rate
	}
}

// ceiling is the highest rate kept up with (0: none was) and whether the
// search stopped at max rather than at a rate not kept up with.
func (s *rateSearch) ceiling() (rate int, reachedMax bool) {
	return s.good, s.bad == 0 && s.good >= s.max
}
