package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
	"github.com/tock-sched/tock/wire"
)

// gauges reads reg's gauges: name{label value} → value ("" label value
// for unlabelled ones).
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_GAUGE {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// writeCerts writes PEM certificates expiring at each of notAfter into
// one file, as a chain file holds a leaf and its intermediates.
func writeCerts(t *testing.T, notAfter ...time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "certs.pem")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, na := range notAfter {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 1)), Subject: pkix.Name{CommonName: "tock test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: na}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: der}); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// A node exports whether NATS is connected, the recorders' backlog while
// it can read it, and when each certificate file it names expires (the
// earliest certificate of a chain).
func TestNodeMetrics(t *testing.T) {
	n := testenv.NATS(t)
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	soon := time.Now().Add(10 * 24 * time.Hour).Truncate(time.Second)
	later := time.Now().Add(400 * 24 * time.Hour).Truncate(time.Second)
	cfg := Config{Roles: RolesOf(RoleRecorder)}
	cfg.TLS.Cert = writeCerts(t, later, soon) // a leaf, and an intermediate expiring first
	cfg.NATSAuth.TLS.CA = writeCerts(t, later)
	reg := prometheus.NewRegistry()
	d := deps{nc: nc, js: js, reg: reg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := registerNodeMetrics(cfg, d); err != nil {
		t.Fatal(err)
	}

	g := gauges(t, reg)
	if g["tock_nats_up"] != 1 {
		t.Errorf("tock_nats_up = %v, want 1 while connected", g["tock_nats_up"])
	}
	if _, ok := g["tock_recorder_backlog"]; ok {
		t.Error("tock_recorder_backlog exported before the recorder's consumer exists")
	}
	if _, ok := g["tock_buckets"]; ok {
		t.Error("tock_buckets exported by a node without a store")
	}
	for cert, want := range map[string]time.Time{"tls-cert": soon, "nats-tls-ca": later} {
		if got := g["tock_tls_cert_expiry_timestamp_seconds{"+cert+"}"]; got != float64(want.Unix()) {
			t.Errorf("tock_tls_cert_expiry_timestamp_seconds{cert=%q} = %v, want %v", cert, got, want.Unix())
		}
	}
	if len(g) != 3 {
		t.Errorf("gauges %v; want tock_nats_up and two certificates' expiry", g)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wire.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, wire.EventStream, wire.RecorderConsumerConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, wire.EventSubjectPrefix+"x", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// The consumer's pending count follows the publish a moment later.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		g := gauges(t, reg)
		if g["tock_recorder_backlog"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("tock_recorder_backlog = %v (present: %v), want 1", g["tock_recorder_backlog"], g)
			break
		}
	}

	nc.Close()
	g = gauges(t, reg)
	if g["tock_nats_up"] != 0 {
		t.Errorf("tock_nats_up = %v once closed, want 0", g["tock_nats_up"])
	}
	if _, ok := g["tock_recorder_backlog"]; ok {
		t.Error("tock_recorder_backlog exported while NATS cannot be read")
	}
}

func TestCertExpiryNeedsACertificate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := certExpiry(path); err == nil {
		t.Error("certExpiry of a file holding no certificate: no error")
	}
}

// The slots gauges read, when scraped, the slots held and the executions
// waiting, by key, from Postgres.
func TestSlotGauges(t *testing.T) {
	t.Parallel()
	st := storetest.New(t, 16)
	ctx := context.Background()
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j := &model.Job{Namespace: "default", Name: "keyed", Schedule: schedule.Spec{Cron: "0 0 3 * * *"}, NextRunAt: ptrTo(now.Add(time.Hour)),
		Handler: domain.Handler{Type: domain.HandlerCustom, Name: "h"}, State: domain.JobActive,
		Policy: &domain.JobPolicy{Concurrency: &domain.Concurrency{Key: "k", Limit: 1, Slot: "ns:default:k"}}}
	if err := st.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := st.CreateManualExecution(ctx, j.ID, now.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newSlotCollector(st))
	g := gauges(t, reg)
	if g["tock_concurrency_slots_held{ns:default:k}"] != 1 || g["tock_concurrency_waiting{ns:default:k}"] != 2 {
		t.Errorf("gauges %v; want 1 held and 2 waiting for ns:default:k", g)
	}
}

func ptrTo[T any](v T) *T { return &v }
