package jobs

import (
	"fmt"
	"testing"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
)

// BenchmarkBuild is the cost of checking a job and computing its first
// run, which every job created through the API or tockbench pays.
func BenchmarkBuild(b *testing.B) {
	svc, err := New(Config{Store: struct{ Store }{}, Clock: &fakeClock{}})
	if err != nil {
		b.Fatal(err)
	}
	nj := NewJob{Namespace: "bench", Handler: domain.Handler{Type: domain.HandlerCustom, Name: "noop"}}
	b.ReportAllocs()
	for i := range b.N {
		nj.Name = fmt.Sprintf("job-%07d", i)
		nj.Schedule = schedule.Spec{Cron: fmt.Sprintf("%d * * * * *", i%60)}
		if _, err := svc.Build(nj, fixed(t0)); err != nil {
			b.Fatal(err)
		}
	}
}
