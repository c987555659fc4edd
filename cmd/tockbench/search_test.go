package main

import (
	"slices"
	"testing"
	"time"
)

func TestRateSearch(t *testing.T) {
	tests := []struct {
		name                        string
		start, max, step, precision int
		// limit is the cluster under test: it keeps up with any rate up
		// to limit.
		limit       int
		wantRates   []int
		wantPhases  []string
		wantCeiling int
		wantMax     bool
	}{
		{
			name: "ramp then two bisections", start: 1000, max: 20000, step: 1000, precision: 250, limit: 3700,
			wantRates:   []int{1000, 2000, 3000, 4000, 3500, 3750},
			wantPhases:  []string{"ramp", "ramp", "ramp", "ramp", "bisect", "bisect"},
			wantCeiling: 3500,
		},
		{
			name: "reaches max", start: 1000, max: 2500, step: 1000, precision: 250, limit: 10000,
			wantRates:   []int{1000, 2000, 2500},
			wantPhases:  []string{"ramp", "ramp", "ramp"},
			wantCeiling: 2500, wantMax: true,
		},
		{
			name: "start equals max", start: 500, max: 500, step: 100, precision: 50, limit: 10000,
			wantRates:   []int{500},
			wantPhases:  []string{"ramp"},
			wantCeiling: 500, wantMax: true,
		},
		{
			name: "fails at max after the ramp", start: 1000, max: 2500, step: 1000, precision: 200, limit: 2400,
			wantRates:   []int{1000, 2000, 2500, 2250, 2375},
			wantPhases:  []string{"ramp", "ramp", "ramp", "bisect", "bisect"},
			wantCeiling: 2375,
		},
		{
			name: "start too high: bisects down from zero", start: 1000, max: 5000, step: 1000, precision: 300, limit: 200,
			wantRates:   []int{1000, 500, 250},
			wantPhases:  []string{"ramp", "bisect", "bisect"},
			wantCeiling: 0,
		},
		{
			name: "precision as wide as the step: no bisection", start: 100, max: 1000, step: 100, precision: 100, limit: 250,
			wantRates:   []int{100, 200, 300},
			wantPhases:  []string{"ramp", "ramp", "ramp"},
			wantCeiling: 200,
		},
		{
			name: "nothing kept up with", start: 4, max: 10, step: 1, precision: 1, limit: 0,
			wantRates:   []int{4, 2, 1},
			wantPhases:  []string{"ramp", "bisect", "bisect"},
			wantCeiling: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &rateSearch{start: tt.start, max: tt.max, step: tt.step, precision: tt.precision}
			var rates []int
			var phases []string
			for {
				rate, phase, ok := s.next()
				if !ok {
					break
				}
				if len(rates) > 100 {
					t.Fatalf("search does not end: %v", rates)
				}
				rates, phases = append(rates, rate), append(phases, phase)
				s.record(rate, rate <= tt.limit)
			}
			if !slices.Equal(rates, tt.wantRates) || !slices.Equal(phases, tt.wantPhases) {
				t.Errorf("steps %v %v, want %v %v", rates, phases, tt.wantRates, tt.wantPhases)
			}
			if c, atMax := s.ceiling(); c != tt.wantCeiling || atMax != tt.wantMax {
				t.Errorf("ceiling %d (at max %v), want %d (%v)", c, atMax, tt.wantCeiling, tt.wantMax)
			}
		})
	}
}

func TestKeptUp(t *testing.T) {
	ms := func(v float64) *float64 { return &v }
	good := Report{Expected: 600, Fired: 600, Succeeded: 600, FireLag: Lag{P50: ms(40), P99: ms(900), Max: ms(1200)}}
	tests := []struct {
		name   string
		edit   func(r *Report)
		wantOK bool
		want   []string
	}{
		{name: "kept up", edit: func(*Report) {}, wantOK: true},
		{name: "p99 at the bound", edit: func(r *Report) { r.FireLag.P99 = ms(1000) }, wantOK: true},
		{name: "p99 over the bound", edit: func(r *Report) { r.FireLag.P99 = ms(1000.5) },
			want: []string{"fire lag p99 1000ms > 1s"}},
		{name: "nothing dispatched", edit: func(r *Report) { r.FireLag = Lag{} },
			want: []string{"no fire lag measured"}},
		{name: "fell behind", edit: func(r *Report) { r.ZeroFired, r.Fired, r.Succeeded, r.FireLag.P99 = 100, 500, 450, ms(25000) },
			want: []string{
				"100 of 600 scheduled times not fired within the settle time",
				"50 executions not recorded as succeeded within the settle time",
				"fire lag p99 25.0s > 1s",
			}},
		{name: "fired twice", edit: func(r *Report) { r.MultiFired, r.Fired, r.Succeeded = 1, 601, 601 },
			want: []string{"1 scheduled times fired more than once"}},
		{name: "unexpected", edit: func(r *Report) { r.Unexpected = 3 },
			want: []string{"3 executions at times no job was scheduled for"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good
			tt.edit(&r)
			ok, why := keptUp(&r, time.Second)
			if ok != tt.wantOK || !slices.Equal(why, tt.want) {
				t.Errorf("keptUp = %v %q, want %v %q", ok, why, tt.wantOK, tt.want)
			}
		})
	}
}
