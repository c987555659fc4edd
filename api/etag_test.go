package api

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// A job's ETag is its revision: GET, POST and PATCH answer it; PATCH and
// DELETE with If-Match write only while the job is at it. Of two PATCHes
// sent at once with the same ETag, one wins and the other gets 412 and
// changes nothing.
func TestIfMatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := jobBody("etag")
	body["description"] = "first"
	created := e.do("POST", "/v1/jobs", body)
	mustStatus(t, created, http.StatusCreated)
	var j struct {
		ID       string `json:"id"`
		Revision int64  `json:"revision"`
	}
	created.decode(t, &j)
	path := "/v1/jobs/" + j.ID
	if got := created.header.Get("ETag"); got != `"1"` || j.Revision != 1 {
		t.Fatalf("a new job's ETag %q, revision %d; want \"1\", 1", got, j.Revision)
	}
	r := e.do("GET", path, nil)
	mustStatus(t, r, http.StatusOK)
	tag := r.header.Get("ETag")
	if tag != `"1"` {
		t.Fatalf("GET's ETag %q", tag)
	}

	// Two editors who read the same revision change it at once.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i, d := range []string{"alice's", "bob's"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = e.doHeaders("PATCH", path, map[string]any{"description": d}, map[string]string{"If-Match": tag}).status
		}()
	}
	wg.Wait()
	if !(codes[0] == 200 && codes[1] == 412 || codes[0] == 412 && codes[1] == 200) {
		t.Fatalf("two PATCHes with one ETag answered %v; want one 200 and one 412", codes)
	}
	r = e.do("GET", path, nil)
	var now struct {
		Description string `json:"description"`
		Revision    int64  `json:"revision"`
	}
	r.decode(t, &now)
	winner := map[bool]string{true: "alice's", false: "bob's"}[codes[0] == 200]
	if now.Description != winner || now.Revision != 2 || r.header.Get("ETag") != `"2"` {
		t.Errorf("after the race: %+v, ETag %q; want %s at revision 2", now, r.header.Get("ETag"), winner)
	}

	// The loser's 412 says what to do; a weak form of the current ETag and
	// * are taken; a malformed one is a 400 naming the header.
	r = e.doHeaders("PATCH", path, map[string]any{"description": "late"}, map[string]string{"If-Match": tag})
	mustStatus(t, r, http.StatusPreconditionFailed)
	if p := r.problem(t); p.Type != ProblemPrecondition || p.Detail == nil || !strings.Contains(*p.Detail, "read it again") {
		t.Errorf("412: %+v", p)
	}
	r = e.doHeaders("PATCH", path, map[string]any{"description": "third"}, map[string]string{"If-Match": `W/"2"`})
	mustStatus(t, r, http.StatusOK)
	if r.header.Get("ETag") != `"3"` {
		t.Errorf("PATCH's ETag %q, want \"3\"", r.header.Get("ETag"))
	}
	mustStatus(t, e.doHeaders("PATCH", path, map[string]any{"description": "any"}, map[string]string{"If-Match": "*"}), http.StatusOK)
	r = e.doHeaders("PATCH", path, map[string]any{"description": "x"}, map[string]string{"If-Match": "4"})
	mustStatus(t, r, http.StatusBadRequest)
	if p := r.problem(t); p.Errors == nil || len(*p.Errors) != 1 || (*p.Errors)[0].Field != "If-Match" {
		t.Errorf("a malformed If-Match: %+v", p)
	}

	// Pausing is a change too; a DELETE with an old ETag deletes nothing.
	mustStatus(t, e.do("POST", path+"/pause", nil), http.StatusOK)
	mustStatus(t, e.doHeaders("DELETE", path, nil, map[string]string{"If-Match": `"4"`}), http.StatusPreconditionFailed)
	mustStatus(t, e.do("GET", path, nil), http.StatusOK)
	mustStatus(t, e.doHeaders("DELETE", path, nil, map[string]string{"If-Match": `"5"`}), http.StatusNoContent)
	mustStatus(t, e.do("GET", path, nil), http.StatusNotFound)
}
