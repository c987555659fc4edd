package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a server (a Postgres, say) while it is
// up; while it is down it accepts each new connection and closes it at
// once, as a server going down or not up yet does, and it has cut the
// connections it was forwarding. It starts down or up as NewProxy is told
// and stops at the end of the test.
type Proxy struct {
	// Addr is where it listens (127.0.0.1:port).
	Addr string

	target  string
	up      atomic.Bool
	refused atomic.Int64
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port) while up.
func NewProxy(t testing.TB, target string, up bool) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	p.up.Store(up)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); p.SetUp(false); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.up.Load() {
				p.refused.Add(1)
				c.Close()
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.forward(c) }()
		}
	}()
	return p
}

// SetUp brings the server behind p up, or down (cutting every connection).
func (p *Proxy) SetUp(up bool) {
	p.up.Store(up)
	if up {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Refused is the number of connections turned away while down.
func (p *Proxy) Refused() int64 { return p.refused.Load() }

func (p *Proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, s)
		p.mu.Unlock()
		c.Close()
		s.Close()
	}()
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); copied <- struct{}{} }()
	<-copied // either side closing ends both (the deferred Closes)
}
