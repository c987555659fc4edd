package jobs

import (
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// errKeyedDepends refuses a job with both dependencies and a concurrency
// key: its executions would wait for their upstreams in the state a
// key's waiting executions wait in.
const errKeyedDepends = "cannot be combined with depends_on yet: an execution waits for its upstreams or for a slot, not both"

// slotFault renders j's key after a change (keySlot), refusing a job
// that has both a key and dependencies.
func slotFault(j *model.Job) error {
	var f faults
	if j.Policy != nil && j.Policy.Concurrency != nil && j.Depends != nil {
		f.add("concurrency", "%s", errKeyedDepends)
	} else {
		keySlot(j, &f)
	}
	return f.err()
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
	if j.Policy == nil || j.Policy.Concurrency == nil {
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
