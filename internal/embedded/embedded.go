// Package embedded runs etcd and NATS JetStream inside the current process:
// `tockd dev` uses it for a one-machine setup, and tests use it (through
// internal/testenv) to start, stop and restart real servers.
package embedded

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
//
// It picks one at random below the kernel's ephemeral range (Linux's
// ip_local_port_range), from 10000 up. A port of that range, which the
// kernel hands to every outgoing connection and to every listener on
// port 0, can be taken by one of them while a server stopped on it waits
// to start again on the same port (a cluster member restarted keeps its
// URLs): the restart then fails with "address already in use", which the
// tests that stop and restart etcd members met under load. Where the
// range cannot be read, or leaves no room below it, the kernel picks.
func FreePort() (int, error) {
	if lo := ephemeralLow(); lo > minPort+1000 {
		for range 100 {
			p := minPort + rand.IntN(lo-minPort)
			if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
				l.Close()
				return p, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// minPort is the lowest port FreePort picks: above the well-known
// services of a development machine.
const minPort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when
// it cannot be read (not Linux).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return lo
}

// Etcd is a single-member etcd server. Ports and data directory are kept
// across Stop and Start, so a restarted server is the same cluster.
type Etcd struct {
	Dir        string
	ClientPort int // 0 picks a free port on first Start
	PeerPort   int
	// CertFile and KeyFile, if set, serve clients over TLS (an https://
	// endpoint) with this certificate; ClientCAFile, if set too, makes
	// clients present a certificate one of its CAs signed.
	CertFile, KeyFile, ClientCAFile string
	// Name and InitialCluster make the server a member of a cluster
	// (EtcdCluster sets them): its member name, and every member's
	// name=peer URL, comma separated. Empty: a single member, tock-dev.
	Name, InitialCluster string
	e                    *embed.Etcd
}

// Endpoint is the client URL, e.g. http://127.0.0.1:23790 (https:// with
// TLS).
func (s *Etcd) Endpoint() string {
	scheme := "http"
	if s.CertFile != "" {
		scheme = "https"
	}
	return scheme + "://127.0.0.1:" + strconv.Itoa(s.ClientPort)
}

// Start starts the server and waits until it serves clients.
func (s *Etcd) Start() error {
	var err error
	if s.ClientPort == 0 {
		if s.ClientPort, err = FreePort(); err != nil {
			return err
		}
	}
	if s.PeerPort == 0 {
		if s.PeerPort, err = FreePort(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("etcd data dir: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "tock-dev"
	if s.Name != "" {
		cfg.Name = s.Name
	}
	cfg.Dir = filepath.Join(s.Dir, "etcd")
	// etcd's own log is noise here (it reports its shutdown as errors);
	// tock logs what matters about etcd from the client side.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu, _ := url.Parse(s.Endpoint())
	pu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(s.PeerPort))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if s.InitialCluster != "" {
		// A restarted member reads its cluster from its data directory
		// and ignores this.
		cfg.InitialCluster = s.InitialCluster
	}
	if s.CertFile != "" {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: s.CertFile, KeyFile: s.KeyFile,
			TrustedCAFile: s.ClientCAFile, ClientCertAuth: s.ClientCAFile != ""}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd on %s: %w", s.Endpoint(), err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("start etcd: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return fmt.Errorf("start etcd on %s: not ready after 30s", s.Endpoint())
	}
	s.e = e
	return nil
}

// PeerURL is the URL other members reach this one at.
func (s *Etcd) PeerURL() string { return "http://127.0.0.1:" + strconv.Itoa(s.PeerPort) }

// Stop stops the server; Start starts it again with the same data.
func (s *Etcd) Stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// NATS is a NATS server with JetStream. Port and store directory are kept
// across Stop and Start.
type NATS struct {
	Dir  string
	Port int // 0 picks a free port on first Start
	// Configure, if set, changes the server's options before it starts
	// (users, TLS, ...): Port and StoreDir are set already.
	Configure func(*server.Options)
	// Name, ClusterPort and Routes make the server one of a cluster
	// (NATSCluster sets them): its server name, the port of its cluster
	// listener and the route URLs of every server of the cluster
	// (nats://127.0.0.1:port). Empty: a single server, tock-dev.
	Name        string
	ClusterPort int
	Routes      []string
	s           *server.Server
}

// URL is the client URL, e.g. nats://127.0.0.1:42222.
func (n *NATS) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.Port) }

// Start starts the server and waits until it accepts connections.
func (n *NATS) Start() error {
	if n.Port == 0 {
		p, err := FreePort()
		if err != nil {
			return err
		}
		n.Port = p
	}
	opts := &server.Options{
		ServerName: "tock-dev",
		Host:       "127.0.0.1",
		Port:       n.Port,
		JetStream:  true,
		StoreDir:   filepath.Join(n.Dir, "nats"),
		NoLog:      true,
		NoSigs:     true,
	}
	if err := n.cluster(opts); err != nil {
		return err
	}
	if n.Configure != nil {
		n.Configure(opts)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("nats server on %s: %w", n.URL(), err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("nats server on %s: not ready after 30s", n.URL())
	}
	n.s = s
	return nil
}

// cluster sets opts up for a server of a cluster, if n is one.
func (n *NATS) cluster(opts *server.Options) error {
	if n.Name != "" {
		opts.ServerName = n.Name
	}
	if n.ClusterPort == 0 {
		return nil
	}
	opts.Cluster = server.ClusterOpts{Name: "tock", Host: "127.0.0.1", Port: n.ClusterPort}
	for _, r := range n.Routes {
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("nats route %s: %w", r, err)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return nil
}

// Running reports whether the server runs (started and not stopped).
func (n *NATS) Running() bool { return n.s != nil }

// Server is the running server, nil when it is stopped.
func (n *NATS) Server() *server.Server { return n.s }

// Stop shuts the server down; Start starts it again with the same data.
func (n *NATS) Stop() {
	if n.s != nil {
		n.s.Shutdown()
		n.s.WaitForShutdown()
		n.s = nil
	}
}
