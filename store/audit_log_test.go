package store

import (
	"context"
	"testing"
	"time"

	"github.com/tock-sched/tock/store/model"
)

// Maintenance makes the audit trail's days ahead (moving a day's rows
// out of the default partition) and drops the days past retention.
func TestMaintainAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC()
	old, recent := now.AddDate(0, 0, -40), now.Add(-time.Hour)
	if err := s.CreateAuditEntries(ctx, []model.AuditEntry{
		{At: old, Actor: "key:a", Namespace: "n", Action: "jobs.create", Resource: "job 1"},
		{At: recent, Actor: "key:a", Namespace: "n", Action: "jobs.update", Resource: "job 1"},
	}); err != nil {
		t.Fatal(err)
	}
	// Both rows are in the default partition; a pass makes today's and
	// moves the recent row into it, and the old one stays in the default.
	if _, err := s.MaintainAuditPartitions(ctx, now, 2, 0); err != nil {
		t.Fatal(err)
	}
	where := func(action string) string {
		var rel string
		if err := s.pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM audit_log WHERE action = $1`, action).Scan(&rel); err != nil {
			t.Fatal(err)
		}
		return rel
	}
	if got, want := where("jobs.update"), DayPartition("audit_log", recent); got != want {
		t.Errorf("recent entry in %s, want %s", got, want)
	}
	// A day partition of 40 days ago, then retention of 30 days.
	if _, err := s.pool.Exec(ctx, `CREATE TABLE `+DayPartition("audit_log", old.AddDate(0, 0, -1))+` PARTITION OF audit_log
		FOR VALUES FROM ('`+old.AddDate(0, 0, -1).Truncate(24*time.Hour).Format(time.RFC3339)+`') TO ('`+old.Truncate(24*time.Hour).Format(time.RFC3339)+`')`); err != nil {
		t.Fatal(err)
	}
	dropped, err := s.MaintainAuditPartitions(ctx, now, 2, 30*24*time.Hour)
	if err != nil || dropped != 1 {
		t.Fatalf("dropped %d, %v", dropped, err)
	}
	entries, _, err := s.ListAuditEntries(ctx, AuditFilter{})
	if err != nil || len(entries) != 1 || entries[0].Action != "jobs.update" {
		t.Fatalf("after retention: %+v %v", entries, err)
	}
}
