package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tock-sched/tock/api/models"
	"github.com/tock-sched/tock/calendar"
	"github.com/tock-sched/tock/jobs"
)

// PreviewJob handles GET /v1/jobs/{id}/preview.
func (h *endpoints) PreviewJob(c echo.Context, id models.ID, p models.PreviewJobParams) error {
	n := jobs.DefaultPreviewCount
	if p.Count != nil {
		n = *p.Count
	}
	var from time.Time
	if p.From != nil {
		from = p.From.UTC()
	}
	pv, err := h.s.jobs.Preview(c.Request().Context(), id, from, n)
	if err != nil {
		return h.storeError(c, err, "job", id)
	}
	out := previewOf(pv)
	if j := pv.Job; j != nil && j.Policy != nil && len(j.Policy.Calendars) > 0 {
		compiled, err := h.compiledCalendars(c, j.Namespace, nil)
		if err != nil {
			return err
		}
		var cals []*calendar.Calendar
		for _, name := range j.Policy.Calendars {
			if cal := compiled[name]; cal != nil {
				cals = append(cals, cal)
			}
		}
		markExcluded(out.Fires, cals)
	}
	return c.JSON(http.StatusOK, out)
}

// markExcluded marks the fires that cals do not allow with the first
// calendar that refuses each, and why.
func markExcluded(fires []models.PreviewFire, cals []*calendar.Calendar) {
	for i := range fires {
		f := &fires[i]
		for _, cal := range cals {
			if name, why := cal.Why(f.At); name != "" {
				f.Excluded = &struct {
					Calendar string `json:"calendar"`
					Reason   string `json:"reason"`
				}{name, why}
				break
			}
		}
	}
}

// PreviewSchedule handles POST /v1/schedules:preview.
func (h *endpoints) PreviewSchedule(c echo.Context) error {
	var req models.PreviewRequest
	_, shape, err := h.readBody(c, h.s.previewSchema, &req)
	if err != nil {
		return err
	}
	n := jobs.DefaultPreviewCount
	if req.Count != nil {
		n = *req.Count
	}
	var from time.Time
	if req.From != nil {
		from = req.From.UTC()
	}
	sp := specOf(&req.Schedule)
	pv, err := h.s.jobs.PreviewSpec(c.Request().Context(), sp, from, n)
	faults := fieldErrorsOf(jobs.Faults(err))
	if err != nil && len(faults) == 0 {
		return h.internal(c, err)
	}
	// What Create would refuse.
	checkStartAt(sp, &faults)
	var cals []*calendar.Calendar
	if req.Calendars != nil && len(*req.Calendars) > 0 {
		ns := namespaceOrDefault(deref(req.Namespace))
		if err := h.queryNamespace(c, "previewSchedule", ns); err != nil {
			return err
		}
		compiled, err := h.compiledCalendars(c, ns, nil)
		if err != nil {
			return err
		}
		for i, name := range *req.Calendars {
			if cal := compiled[name]; cal != nil {
				cals = append(cals, cal)
			} else {
				faults.add(fmt.Sprintf("calendars[%d]", i), "no calendar is called %q in namespace %q", name, ns)
			}
		}
	}
	// Report the use case's faults along with the request's.
	if errs := shape.merge(faults); len(errs) > 0 {
		return errs.err()
	}
	out := previewOf(pv)
	markExcluded(out.Fires, cals)
	return c.JSON(http.StatusOK, out)
}

// previewOf is the API's view of a preview.
func previewOf(pv *jobs.Preview) models.Preview {
	out := models.Preview{
		Schedule: scheduleOf(pv.Schedule),
		Timezone: pv.Location.String(),
		From:     pv.From.UTC(),
		Fires:    make([]models.PreviewFire, 0, len(pv.Fires)),
	}
	if pv.Job != nil {
		out.JobId = ptr(pv.Job.ID)
		out.State = ptr(models.JobState(pv.Job.State))
	}
	for i, f := range pv.Fires {
		// A run RFC 3339 cannot write (after the year 9999, or before
		// year 0 in the zone: a from at either end) is left out, as a
		// run after the end of the schedule's window is.
		if !writable(f.At.UTC()) || !writable(f.Local) {
			continue
		}
		zone, _ := f.Local.Zone()
		pf := models.PreviewFire{
			At:      f.At.UTC(),
			Local:   f.Local,
			Zone:    nonEmpty(zone),
			Nominal: nonEmpty(f.Nominal),
			Note:    nonEmpty(f.Note),
		}
		if f.DST != "" {
			pf.Dst = ptr(models.PreviewFireDst(f.DST))
		}
		if f.Occurrence != 0 {
			pf.Occurrence = ptr(f.Occurrence)
		}
		if i < len(pv.Waits) {
			ws := make([]models.PreviewUpstream, len(pv.Waits[i]))
			for k, w := range pv.Waits[i] {
				ws[k] = models.PreviewUpstream{JobId: w.Job.ID, Name: nonEmpty(w.Job.Name), On: models.PreviewUpstreamOn(w.On),
					At: utc(w.At), Note: w.Note}
			}
			pf.WaitsFor = &ws
		}
		out.Fires = append(out.Fires, pf)
	}
	return out
}
