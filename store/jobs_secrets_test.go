package store

import (
	"context"
	"errors"
	"testing"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/store/model"
)

// ResealSecrets rewrites, batch by batch, the job specs and jobs whose
// handlers reseal changes, bumps those jobs' versions, leaves the others
// alone, and reports the rows reseal refuses.
func TestResealSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	sealedBy := func(kid string) map[string]domain.SealedSecret {
		return map[string]domain.SealedSecret{"Authorization": {KeyID: kid, Data: []byte("ct-" + kid)}}
	}
	var jobs []*model.Job
	for i, kid := range []string{"old", "old", "new", "bad", "old", ""} {
		j := testJob("reseal-"+string(rune('a'+i)), nil)
		if kid != "" {
			j.Handler.SecretHeaders = sealedBy(kid)
		}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	// The new key's rows are not changed; "bad" is one that cannot be
	// opened.
	reseal := func(h *domain.Handler) (bool, error) {
		switch h.SecretHeaders["Authorization"].KeyID {
		case "bad":
			return false, errors.New("key bad unknown")
		case "new":
			return false, nil
		}
		h.SecretHeaders = sealedBy("new")
		return true, nil
	}
	res, err := s.ResealSecrets(ctx, 2, reseal)
	if err != nil {
		t.Fatal(err)
	}
	// Jobs 0, 1 and 4 say the same, so they share one spec.
	if res.Specs != 1 || res.Jobs != 3 || res.Seen != 8 || len(res.Failed) != 2 {
		t.Fatalf("result %+v, want 1 spec and 3 jobs rewritten of 8 rows, 2 failures", res)
	}
	for _, f := range res.Failed {
		if (f.Table != "jobs" || f.ID != jobs[3].ID) && (f.Table != "job_specs" || f.ID != *jobs[3].SpecID) {
			t.Errorf("failure %s %s: %v", f.Table, f.ID, f.Err)
		}
	}
	for i, j := range jobs {
		got, err := s.GetJob(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		var spec domain.Handler
		if err := s.pool.QueryRow(ctx, "SELECT handler FROM job_specs WHERE id = $1", got.SpecID).Scan(&spec); err != nil {
			t.Fatal(err)
		}
		want, bumped := "new", i == 0 || i == 1 || i == 4
		switch i {
		case 3:
			want = "bad"
		case 5:
			want = ""
		}
		if k := got.Handler.SecretHeaders["Authorization"].KeyID; k != want {
			t.Errorf("job %d: key %q, want %q", i, k, want)
		}
		if k := spec.SecretHeaders["Authorization"].KeyID; k != want {
			t.Errorf("job %d's spec: key %q, want %q", i, k, want)
		}
		if (got.Version != j.Version) != bumped {
			t.Errorf("job %d: version %d → %d", i, j.Version, got.Version)
		}
	}
	// A change read before the reseal is stale: it would write the old
	// values back.
	stale := jobs[0]
	if err := s.UpdateJob(ctx, stale); !errors.Is(err, ErrStale) {
		t.Errorf("an update from before the reseal: %v, want ErrStale", err)
	}
	// Nothing left to do: nothing written.
	if res, err := s.ResealSecrets(ctx, 0, reseal); err != nil || res.Jobs != 0 || res.Specs != 0 {
		t.Errorf("second pass: %+v, %v", res, err)
	}
}
