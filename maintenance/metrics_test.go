package maintenance_test

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tock-sched/tock/backfill"
	"github.com/tock-sched/tock/dispatcher"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/maintenance"
	"github.com/tock-sched/tock/partition"
	"github.com/tock-sched/tock/recorder"
	"github.com/tock-sched/tock/scanner"
	"github.com/tock-sched/tock/store"
	"github.com/tock-sched/tock/store/storetest"
)

// describing is a Registerer that remembers every metric registered on
// it, as name{labels}: a Vec shows on /metrics only once a label value is
// used, so gathering would miss it.
type describing struct {
	*prometheus.Registry
	names []string
}

var descRE = regexp.MustCompile(`fqName: "([^"]*)".*variableLabels: \{([^}]*)\}`)

func (d *describing) Register(c prometheus.Collector) error {
	if err := d.Registry.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		m := descRE.FindStringSubmatch(desc.String())
		name := m[1]
		if m[2] != "" {
			name += "{" + m[2] + "}"
		}
		d.names = append(d.names, name)
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// schedulerMetrics are the metrics a tockd node with the scheduler and
// recorder roles serves on /metrics, besides the executor's and the
// API's (which register their own) and Go's. Every one that was a
// package-level collector before components took a Registerer is here;
// dashboards, alerts and docs name them. Dropping one fails
// TestComponentsRegisterEveryMetric.
var schedulerMetrics = []string{
	// scanner
	"tock_buckets_owned",
	"tock_fenced_total",
	"tock_fire_backlog",
	"tock_fire_backlog_limit",
	"tock_fire_held_seconds_total",
	"tock_fire_lease_holds_total",
	"tock_fired_total",
	"tock_skipped_total{reason}",
	"tock_calendar_excluded_total{calendar}",
	// dispatcher
	"tock_dispatch_errors_total",
	"tock_dispatched_total",
	"tock_fire_lag_seconds",
	"tock_republished_total",
	"tock_unpublishable_total",
	// recorder
	"tock_dead_events_total{reason}",
	"tock_dead_letters_total",
	"tock_deferred_total",
	"tock_retries_total",
	"tock_start_lag_seconds",
	// partition
	"tock_rebalances_total",
	// backfill
	"tock_backfill_fired_total",
	// maintenance
	"tock_archived_days_total",
	"tock_audit_days_dropped_total",
	"tock_idempotency_keys_expired_total",
	"tock_lost_requeued_total",
	"tock_maintenance_last_success_timestamp_seconds{service}",
	"tock_rescued_total{kind}",
	"tock_retention_completed_jobs_deleted_total",
	"tock_retention_days_dropped_total",
	"tock_retention_rows_deleted_total{table}",
	"tock_wipe_requeued_total",
}

// The components tockd's scheduler and recorder roles build, given a
// fresh registry, register every metric tockd serves, and no other; a
// second set on the same registry shares them (several nodes in one
// process), and a set given no registry works too.
func TestComponentsRegisterEveryMetric(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	js := testenv.JetStream(t)
	// Never dialled: partition.New only keeps it.
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Close() })

	build := func(reg prometheus.Registerer) {
		t.Helper()
		check := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		disp, err := dispatcher.New(dispatcher.Config{JS: js, Store: st, Registerer: reg})
		check("dispatcher", err)
		scan, err := scanner.New(scanner.Config{Store: st, Dispatcher: disp, NodeID: "n1", Registerer: reg})
		check("scanner", err)
		_, err = recorder.New(recorder.Config{JS: js, Store: st, Registerer: reg})
		check("recorder", err)
		node, err := partition.New(partition.Config{Client: etcd, NodeID: "n1", Buckets: 16, Registerer: reg})
		check("partition", err)
		_, err = backfill.New(backfill.Config{Store: st, Dispatcher: disp, NodeID: "n1", Owned: node.Owned, Registerer: reg})
		check("backfill", err)
		_, err = maintenance.NewLostWorkRescuer(maintenance.LostWorkRescuerConfig{Store: st, Buckets: scan.Owned, Registerer: reg})
		check("lost work", err)
		_, err = maintenance.NewWipeRecovery(maintenance.WipeRecoveryConfig{JS: js, Store: st, Buckets: scan.Owned, Registerer: reg})
		check("wipe recovery", err)
		_, err = maintenance.NewStuckRescuer(maintenance.StuckRescuerConfig{JS: js, Store: st, Buckets: scan.Owned, Registerer: reg})
		check("stuck rescue", err)
		_, err = maintenance.NewPartitionsAhead(maintenance.PartitionsAheadConfig{Store: st, Registerer: reg})
		check("partitions ahead", err)
		_, err = maintenance.NewIdempotencyPruner(maintenance.IdempotencyPrunerConfig{Store: st, Registerer: reg})
		check("idempotency", err)
		_, err = maintenance.NewAuditPruner(maintenance.AuditPrunerConfig{Store: st, Registerer: reg})
		check("audit", err)
		arch, err := maintenance.NewArchiver(maintenance.ArchiverConfig{DB: st.Pool(), Dir: t.TempDir(), Registerer: reg})
		check("archiver", err)
		_, err = maintenance.NewRetention(maintenance.RetentionConfig{Store: st, Archiver: arch, Registerer: reg})
		check("retention", err)
	}

	reg := &describing{Registry: prometheus.NewRegistry()}
	build(reg)
	got := slices.Clone(reg.names)
	slices.Sort(got)
	got = slices.Compact(got) // the services share the last-success gauge
	want := slices.Sorted(slices.Values(schedulerMetrics))
	if !slices.Equal(got, want) {
		t.Errorf("registered metrics:\n%q\nwant:\n%q", got, want)
	}

	build(reg) // a second node in the same process
	build(nil) // and one that exports nothing
}
