package main

import (
	"fmt"
	"strings"

	"github.com/tock-sched/tock/api/models"
)

// dependsFlags are jobs create's dependency flags.
type dependsFlags struct {
	DependsOn         []string `name:"depends-on" help:"Wait for this job's run (repeatable): JOB or JOB:ON, JOB a name, namespace/name or id, ON success (default), failure or any. Without a schedule flag the job is a chain: it runs once per scheduled run of its upstreams." group:"Dependencies" placeholder:"JOB[:ON]"`
	DependsMode       string   `help:"all (default: every upstream) or any (the first)." group:"Dependencies" placeholder:"MODE"`
	LatestWithin      string   `help:"Match the newest upstream run that ended within this long before the scheduled time (\"6h\"), instead of the run at the same time." group:"Dependencies" placeholder:"DUR"`
	WaitTimeout       string   `help:"How long a run waits for its upstreams (default 1h)." group:"Dependencies" placeholder:"DUR"`
	OnTimeout         string   `help:"After --wait-timeout: skip (default) or run." group:"Dependencies" placeholder:"WHAT"`
	OnUpstreamSkipped string   `help:"When an upstream has no run at the time (skipped, paused): skip (default) or run." group:"Dependencies" placeholder:"WHAT"`
}

// set reports the dependency flags set.
func (f dependsFlags) set() []string {
	var out []string
	for _, x := range []struct {
		name string
		set  bool
	}{{"--depends-on", len(f.DependsOn) > 0}, {"--depends-mode", f.DependsMode != ""}, {"--latest-within", f.LatestWithin != ""},
		{"--wait-timeout", f.WaitTimeout != ""}, {"--on-timeout", f.OnTimeout != ""}, {"--on-upstream-skipped", f.OnUpstreamSkipped != ""}} {
		if x.set {
			out = append(out, x.name)
		}
	}
	return out
}

// apply writes the flags into a new job's body.
func (f dependsFlags) apply(body *models.JobCreate) error {
	if len(f.DependsOn) == 0 {
		if set := f.set(); len(set) > 0 {
			return fmt.Errorf("%s needs --depends-on", strings.Join(set, ", "))
		}
		return nil
	}
	ups := make([]models.DependsOn, len(f.DependsOn))
	for i, s := range f.DependsOn {
		job, on := s, ""
		if j := strings.LastIndexByte(s, ':'); j > 0 {
			job, on = s[:j], s[j+1:]
		}
		ups[i] = models.DependsOn{Job: job}
		if on != "" {
			o := models.DependsOnOn(on)
			ups[i].On = &o
		}
	}
	body.DependsOn = &ups
	body.DependsMode = (*models.DependsMode)(optional(f.DependsMode))
	if f.LatestWithin != "" {
		m := models.DependsMatch(fmt.Sprintf(`{"latest_within":%q}`, f.LatestWithin))
		body.DependsMatch = &m
	}
	body.WaitTimeout = optional(f.WaitTimeout)
	body.OnTimeout = (*models.DependsOnTimeout)(optional(f.OnTimeout))
	body.OnUpstreamSkipped = (*models.DependsOnUpstreamSkipped)(optional(f.OnUpstreamSkipped))
	return nil
}

// dependsText is a job's upstreams as "import (success), clean (any)".
func dependsText(j models.Job) string {
	ups := deref(j.DependsOn)
	parts := make([]string, len(ups))
	for i, u := range ups {
		name := u.JobId.String()
		if u.Name != nil {
			name = *u.Name
			if ns := deref(u.Namespace); ns != "" && ns != j.Namespace {
				name = ns + "/" + name
			}
		}
		parts[i] = name + " (" + string(u.On) + ")"
	}
	s := strings.Join(parts, ", ")
	if j.DependsMode != nil && *j.DependsMode == models.DependsModeAny {
		s = "any of " + s
	}
	if j.DependsMatch != nil && !strings.Contains(string(*j.DependsMatch), "same_time") {
		s += ", matched " + string(*j.DependsMatch)
	}
	if deref(j.Chain) {
		s += "; a chain: runs at its upstreams' scheduled times"
	}
	return s
}

type jobGraphCmd struct {
	jobID
}

// Run prints the job's dependencies, up and down: what it waits for
// (and what those wait for), then what waits for it.
func (c *jobGraphCmd) Run(a *app) error {
	id, err := parseID(c.ID)
	if err != nil {
		return err
	}
	r, err := a.api.GetJobGraphWithResponse(a.ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	if a.json {
		return a.printRawJSON(r.Body)
	}
	g, err := decoded(r.JSON200)
	if err != nil {
		return err
	}
	name := func(ref models.JobRef) string {
		if ref.Namespace != g.Job.Namespace {
			return ref.Namespace + "/" + ref.Name
		}
		return ref.Name
	}
	ups, downs := map[string][]models.JobEdge{}, map[string][]models.JobEdge{}
	for _, e := range g.Edges {
		ups[e.Downstream.Id.String()] = append(ups[e.Downstream.Id.String()], e)
		downs[e.Upstream.Id.String()] = append(downs[e.Upstream.Id.String()], e)
	}
	var walk func(id string, depth int, up bool, seen map[string]bool)
	walk = func(id string, depth int, up bool, seen map[string]bool) {
		if seen[id] {
			return
		}
		seen[id] = true
		edges := downs[id]
		if up {
			edges = ups[id]
		}
		for _, e := range edges {
			other, arrow := e.Downstream, "→ "
			if up {
				other, arrow = e.Upstream, "← "
			}
			note := string(e.On)
			if e.Chain {
				note += ", chain"
			}
			fmt.Fprintf(a.stdout, "%s%s%s (%s)\n", strings.Repeat("  ", depth), arrow, name(other), note)
			walk(other.Id.String(), depth+1, up, seen)
		}
	}
	fmt.Fprintln(a.stdout, name(g.Job))
	if len(g.Edges) == 0 {
		fmt.Fprintln(a.stdout, "  (no dependencies either way)")
		return nil
	}
	fmt.Fprintln(a.stdout, "waits for (← upstream):")
	walk(g.Job.Id.String(), 1, true, map[string]bool{})
	fmt.Fprintln(a.stdout, "waited for by (→ downstream):")
	walk(g.Job.Id.String(), 1, false, map[string]bool{})
	return nil
}
