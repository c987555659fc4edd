package maintenance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tock-sched/tock/archive"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// maintainedStore is a new cluster's store (16 buckets; closed when the
// test ends) and the database's clock.
func maintainedStore(t *testing.T) (*store.Store, time.Time) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Init(ctx, 16); err != nil {
		t.Fatal(err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st, now
}

// One pass of the cluster-wide services, as tockd runs it: partitions a
// week ahead; a 60-day-old day archived, then dropped by a 30-day
// retention; the audit trail's old day dropped by its own retention and
// its days ahead made; an expired idempotency key deleted. Each service
// counts what it did.
func TestPassOnPostgres(t *testing.T) {
	ctx := context.Background()
	st, now := maintainedStore(t)
	partitionsOf := func(parent string) string {
		t.Helper()
		var names string
		if err := st.Pool().QueryRow(ctx, `SELECT coalesce(string_agg(c.relname, ' '), '') FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass`, parent).Scan(&names); err != nil {
			t.Fatal(err)
		}
		return names
	}

	// A day of history past retention, with one execution.
	at := now.AddDate(0, 0, -60).UTC().Truncate(time.Hour)
	day := at.Format(time.DateOnly)
	if err := st.EnsureHistoryPartitions(ctx, at); err != nil {
		t.Fatal(err)
	}
	old := store.DayPartition("executions", at)
	id := uuid.New()
	if _, err := st.Pool().Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
		state, handler, created_at) VALUES ($1, $2, 0, 'n', 'j', $3, 'succeeded', '{"type":"nats","subject":"a"}', $3)`,
		id, uuid.New(), at); err != nil {
		t.Fatal(err)
	}
	// An audit day past the audit retention.
	oldDay := at.Truncate(24 * time.Hour)
	oldAudit := store.DayPartition("audit_log", oldDay)
	if _, err := st.Pool().Exec(ctx, "CREATE TABLE "+oldAudit+" PARTITION OF audit_log FOR VALUES FROM ('"+
		oldDay.Format(time.RFC3339)+"') TO ('"+oldDay.AddDate(0, 0, 1).Format(time.RFC3339)+"')"); err != nil {
		t.Fatal(err)
	}
	// An idempotency key two days old.
	if _, err := st.Pool().Exec(ctx, `INSERT INTO idempotency_keys (namespace, key, request_hash, created_at)
		VALUES ('n', 'k', '\x00', $1)`, now.Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(partitionsOf("executions"), old) {
		t.Fatalf("setup: no %s in %s", old, partitionsOf("executions"))
	}

	reg := prometheus.NewRegistry()
	dir := t.TempDir()
	parts, err := NewPartitionsAhead(PartitionsAheadConfig{Store: st, Logger: quiet(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := NewIdempotencyPruner(IdempotencyPrunerConfig{Store: st, Logger: quiet(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := NewAuditPruner(AuditPrunerConfig{Store: st, Retention: 45 * 24 * time.Hour, Logger: quiet(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	arch, err := NewArchiver(ArchiverConfig{DB: st.Pool(), Dir: dir, Logger: quiet(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ret, err := NewRetention(RetentionConfig{Store: st, Default: 30 * 24 * time.Hour, Archiver: arch, Logger: quiet(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPass(PassConfig{Lock: st, Wait: true, Services: []Service{parts, keys, audit, ret}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}

	got := partitionsOf("executions")
	if strings.Contains(got, old) {
		t.Errorf("a 60-day-old partition survived a 30d retention: %s", got)
	}
	if ahead := store.DayPartition("executions", now.AddDate(0, 0, 7)); !strings.Contains(got, ahead) {
		t.Errorf("no partition a week ahead (%s): %s", ahead, got)
	}
	if a := partitionsOf("audit_log"); strings.Contains(a, oldAudit) || !strings.Contains(a, store.DayPartition("audit_log", now.AddDate(0, 0, 7))) {
		t.Errorf("audit partitions after a pass with a 45d audit retention: %s", a)
	}
	rows, err := parquet.ReadFile[archive.Execution](filepath.Join(dir, "executions", day+".parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != id.String() {
		t.Errorf("retention archived %+v, want execution %s", rows, id)
	}
	var left int
	if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM idempotency_keys").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d expired idempotency keys left", left)
	}
	for _, c := range []struct {
		what string
		got  float64
		want float64
	}{
		{"tock_retention_days_dropped_total", testutil.ToFloat64(ret.daysDropped), 1},
		{"tock_archived_days_total", testutil.ToFloat64(arch.archived), 1},
		{"tock_audit_days_dropped_total", testutil.ToFloat64(audit.dropped), 1},
		{"tock_idempotency_keys_expired_total", testutil.ToFloat64(keys.expired), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	for _, s := range []string{"partitions_ahead", "idempotency", "audit", "retention"} {
		if v := testutil.ToFloat64(lastSuccess(reg, new(error)).WithLabelValues(s)); v < float64(now.Add(-time.Hour).Unix()) {
			t.Errorf("last success of %s: %v, want about now", s, v)
		}
	}
}

// A directory the archiver cannot write stops it at construction, so a
// node refuses to start rather than keep every day.
func TestArchiverChecksItsDirectory(t *testing.T) {
	st, _ := maintainedStore(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewArchiver(ArchiverConfig{DB: st.Pool(), Dir: filepath.Join(file, "sub")}); err == nil {
		t.Fatal("an archive directory under a file was accepted")
	}
	if _, err := NewArchiver(ArchiverConfig{DB: st.Pool()}); err == nil {
		t.Fatal("an archiver without a directory was accepted")
	}
}

// Through Retention with an Archiver: a namespace with a 1-day retention
// loses its executions older than a day from a day another namespace
// keeps, written first to its own files beside the day's; the other's
// stay; the rows deleted are counted.
func TestRetentionDeletesAShortNamespaceOnPostgres(t *testing.T) {
	ctx := context.Background()
	st, now := maintainedStore(t)
	at := now.Add(-3 * 24 * time.Hour).UTC()
	if err := st.EnsureHistoryPartitions(ctx, at); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateNamespaceRetention(ctx, "short", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	ids := map[string]uuid.UUID{}
	for _, ns := range []string{"short", "other"} {
		ids[ns] = uuid.New()
		if _, err := st.Pool().Exec(ctx, `INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for,
			state, handler, created_at) VALUES ($1, $2, 0, $3, 'j', $4, 'succeeded', '{"type":"nats","subject":"a"}', $4)`,
			ids[ns], uuid.New(), ns, at); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	dir := t.TempDir()
	arch, err := NewArchiver(ArchiverConfig{DB: st.Pool(), Dir: dir, Logger: quiet(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ret, err := NewRetention(RetentionConfig{Store: st, Default: 90 * 24 * time.Hour, Archiver: arch, Logger: quiet(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := ret.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := st.Pool().Query(ctx, "SELECT namespace FROM executions")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ns string
		if err := rows.Scan(&ns); err != nil {
			t.Fatal(err)
		}
		left = append(left, ns)
	}
	if rows.Err() != nil || len(left) != 1 || left[0] != "other" {
		t.Errorf("left %v (%v), want the other namespace's execution", left, rows.Err())
	}
	name := at.Format(time.DateOnly) + ".short.1.parquet"
	archived, err := parquet.ReadFile[archive.Execution](filepath.Join(dir, "executions", name))
	if err != nil {
		t.Fatal(err)
	}
	if len(archived) != 1 || archived[0].ID != ids["short"].String() {
		t.Errorf("%s holds %+v, want execution %s", name, archived, ids["short"])
	}
	if _, err := os.Stat(filepath.Join(dir, "attempts", name)); err != nil {
		t.Error(err)
	}
	if v := testutil.ToFloat64(ret.rowsDeleted.WithLabelValues("executions")); v != 1 {
		t.Errorf(`tock_retention_rows_deleted_total{table="executions"} = %v, want 1`, v)
	}
}
