package embedded

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// NATSCluster is a cluster of NATS servers with clustered JetStream, all
// on loopback, each with its own store directory. A server stopped with
// Stop(i) starts again with Start(i) on the same ports with its data.
type NATSCluster struct {
	Servers []*NATS
}

// NewNATSCluster lays out a cluster of size servers under dir (not yet
// started): free client and cluster ports, routes to each other.
func NewNATSCluster(dir string, size int) (*NATSCluster, error) {
	c := &NATSCluster{}
	var routes []string
	for i := range size {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		cport, err := FreePort()
		if err != nil {
			return nil, err
		}
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(cport))
		c.Servers = append(c.Servers, &NATS{Dir: filepath.Join(dir, "nats-"+strconv.Itoa(i)), Port: port,
			Name: "tock-" + strconv.Itoa(i), ClusterPort: cport})
	}
	for _, s := range c.Servers {
		s.Routes = routes
	}
	return c, nil
}

// StartAll starts every server and waits until JetStream has a meta
// leader that every running server follows.
func (c *NATSCluster) StartAll() error {
	for i := range c.Servers {
		if err := c.Servers[i].Start(); err != nil {
			c.StopAll()
			return err
		}
	}
	return c.WaitJetStream(60 * time.Second)
}

// WaitJetStream waits until the running servers agree on a JetStream meta
// leader.
func (c *NATSCluster) WaitJetStream(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		leader, current := false, true
		for _, n := range c.Servers {
			if s := n.Server(); s != nil {
				leader = leader || s.JetStreamIsLeader()
				current = current && s.JetStreamIsCurrent()
			}
		}
		if leader && current {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nats cluster %s: no JetStream meta leader after %s", c.URL(), timeout)
}

// URL is every server's client URL, comma separated, as nats.Connect and
// --nats-url take it.
func (c *NATSCluster) URL() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// StreamLeader is the index of the server that leads the stream of the
// global account ($G), or -1 if none does.
func (c *NATSCluster) StreamLeader(stream string) int {
	for i, n := range c.Servers {
		if s := n.Server(); s != nil && s.JetStreamIsStreamLeader("$G", stream) {
			return i
		}
	}
	return -1
}

// Stop stops server i; Start(i) starts it again.
func (c *NATSCluster) Stop(i int) { c.Servers[i].Stop() }

// Start starts server i again, with its ports and data.
func (c *NATSCluster) Start(i int) error { return c.Servers[i].Start() }

// StopAll stops every server.
func (c *NATSCluster) StopAll() {
	for _, s := range c.Servers {
		s.Stop()
	}
}

// EtcdCluster is a cluster of etcd members on loopback, each with its own
// data directory. A member stopped with Stop(i) starts again with
// Start(i) into the same cluster, with its data.
type EtcdCluster struct {
	Members []*Etcd
}

// NewEtcdCluster lays out a cluster of size members under dir (not yet
// started).
func NewEtcdCluster(dir string, size int) (*EtcdCluster, error) {
	c := &EtcdCluster{}
	var initial []string
	for i := range size {
		cp, err := FreePort()
		if err != nil {
			return nil, err
		}
		pp, err := FreePort()
		if err != nil {
			return nil, err
		}
		m := &Etcd{Dir: filepath.Join(dir, "etcd-"+strconv.Itoa(i)), ClientPort: cp, PeerPort: pp,
			Name: "tock-" + strconv.Itoa(i)}
		initial = append(initial, m.Name+"="+m.PeerURL())
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		m.InitialCluster = strings.Join(initial, ",")
	}
	return c, nil
}

// StartAll starts every member at once (a member is ready only when a
// quorum is up) and waits until all are ready.
func (c *EtcdCluster) StartAll() error {
	if err := c.startMany(c.indexes()); err != nil {
		c.StopAll()
		return err
	}
	return nil
}

// StartMany starts the members at the indexes at once: one member alone
// is not ready until a quorum is up.
func (c *EtcdCluster) startMany(idx []int) error {
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Go(func() { errs[k] = c.Members[i].Start() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *EtcdCluster) indexes() []int {
	idx := make([]int, len(c.Members))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// Endpoints are every member's client URL.
func (c *EtcdCluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// Leader is the index of the member the running members follow as
// leader, or -1 if none is known.
func (c *EtcdCluster) Leader() int {
	for i, m := range c.Members {
		if m.e != nil && m.e.Server.Leader() == m.e.Server.MemberID() {
			return i
		}
	}
	return -1
}

// Stop stops member i; Start(i) starts it again.
func (c *EtcdCluster) Stop(i int) { c.Members[i].Stop() }

// Start starts the members at the indexes again, at once, each into the
// cluster with its data; it returns when each is ready (which needs a
// quorum up).
func (c *EtcdCluster) Start(idx ...int) error { return c.startMany(idx) }

// StopAll stops every member.
func (c *EtcdCluster) StopAll() {
	for _, m := range c.Members {
		m.Stop()
	}
}
