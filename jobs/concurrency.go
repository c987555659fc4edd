package jobs

import (
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// errKeyedDepends refuses a job with both dependencies and a concurrency
// key: its executions would wait for their upstreams in the state a
// key's waiting executions wait in.
const errKeyedDepends = "cannot be combined with depends_on yet: an execution waits for its upstreams or for its key, not both"

// keyedField is the field a job's keyed policy is named by in a fault.
func keyedField(p *domain.JobPolicy) string {
	if p.Concurrency != nil {
		return "concurrency"
	}
	return "rate_limit"
}

// slotFault renders j's key after a change (keySlot), refusing a job
// that has both a key and dependencies.
func slotFault(j *model.Job) error {
	var f faults
	if j.Policy != nil && (j.Policy.Concurrency != nil || j.Policy.RateLimit != nil) && j.Depends != nil {
		f.add(keyedField(j.Policy), "%s", errKeyedDepends)
	} else {
		keySlot(j, &f)
	}
	return f.err()
}

// checkRateLimit checks a job's rate limit (faults under "rate_limit.");
// nil for none.
func checkRateLimit(r *domain.RateLimit, f *faults) *domain.RateLimit {
	if r == nil {
		return nil
	}
	for _, fe := range r.Validate() {
		f.add("rate_limit."+fe.Field, "%s", fe.Message)
	}
	v := *r
	v.Slot, v.PerMS = "", 0
	return &v
}

// checkConcurrency checks a job's concurrency policy (faults under
// "concurrency.") and returns it with its defaults; nil for none.
func checkConcurrency(c *domain.Concurrency, f *faults) *domain.Concurrency {
	if c == nil {
		return nil
	}
	for _, fe := range c.Validate() {
		f.add("concurrency."+fe.Field, "%s", fe.Message)
	}
	v := c.WithDefaults()
	v.Slot = ""
	return &v
}

// keySlot renders j's concurrency key over its labels and payload into
// its policy (domain.Concurrency.Slot): every write of the job does, so
// the key its executions carry is always its labels' and payload's. A
// key that cannot be rendered is a fault on "concurrency.key": tock does
// not store a job whose executions would run without their limit.
func keySlot(j *model.Job, f *faults) {
	if j.Policy == nil {
		return
	}
	if r := j.Policy.RateLimit; r != nil {
		v, err := r.Prepared(j.Namespace, j.Labels, j.Payload)
		if err != nil {
			f.add("rate_limit.key", "%s", err.Error())
		} else {
			p := *j.Policy
			p.RateLimit = &v
			j.Policy = &p
		}
	}
	if j.Policy.Concurrency == nil {
		return
	}
	c := *j.Policy.Concurrency
	slot, err := c.SlotKey(j.Namespace, j.Labels, j.Payload)
	if err != nil {
		f.add("concurrency.key", "%s", err.Error())
		return
	}
	c.Slot = slot
	p := *j.Policy
	p.Concurrency = &c
	j.Policy = &p
}
