package egress

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeResolver answers A queries for the names in answers (without a
// trailing dot) with their address, and nothing else: it plays a DNS
// server that says what an attacker's would.
func fakeResolver(answers map[string]netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(server, answers)
		return client, nil
	}}
}

// serveDNS answers one query on c, framed as on TCP (c is not a
// PacketConn, so the resolver frames it so).
func serveDNS(c net.Conn, answers map[string]netip.Addr) {
	defer c.Close()
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return
	}
	msg := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(c, msg); err != nil {
		return
	}
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return
	}
	q, err := p.Question()
	if err != nil {
		return
	}
	a, ok := answers[strings.TrimSuffix(q.Name.String(), ".")]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	if ok && q.Type == dnsmessage.TypeA {
		_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a.As4()})
	}
	out, err := b.Finish()
	if err != nil {
		return
	}
	_, _ = c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...))
}

// target is a test server on loopback that counts its requests.
type target struct {
	*httptest.Server
	hits atomic.Int32
	port string
}

func newTarget(t *testing.T, h http.HandlerFunc) *target {
	t.Helper()
	tg := &target{}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.hits.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(tg.Close)
	u, _ := url.Parse(tg.URL)
	tg.port = u.Port()
	return tg
}

// get sends a GET with c and returns the body, or the error's text.
func get(c *http.Client, u string) (string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A name that resolves to loopback passes CheckURL (it is a name), and
// is refused when the connection is made, on the address DNS gave.
func TestClientRefusesNameResolvingToLoopback(t *testing.T) {
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "etcd keys") })
	p := newPolicy(t, Rules{})
	p.resolver = fakeResolver(map[string]netip.Addr{"rebind.example.com": netip.MustParseAddr("127.0.0.1")})
	u := "http://rebind.example.com:" + tg.port + "/v3/kv/range"
	if msg := checkURL(t, p, u); msg != "" {
		t.Fatalf("CheckURL(%s) = %q; a name passes, only its address can be judged", u, msg)
	}
	_, err := get(p.Client(), u)
	if !IsRefusal(err) || !strings.Contains(err.Error(), "refused: 127.0.0.1 is a loopback address") {
		t.Fatalf("GET %s: %v, want a refusal of 127.0.0.1", u, err)
	}
	for _, spelling := range []string{"localhost", "127.0.0.1", "127.1", "0x7f000001", "2130706433", "0177.0.0.1", "[::ffff:127.0.0.1]"} {
		u := "http://" + spelling + ":" + tg.port + "/"
		if _, err := get(p.Client(), u); !IsRefusal(err) {
			t.Errorf("GET %s: %v, want a refusal", u, err)
		}
	}
	if n := tg.hits.Load(); n != 0 {
		t.Errorf("the target got %d requests, want none", n)
	}

	// The same name, with loopback allowed, gets through: the refusal
	// above was the address's.
	open := newPolicy(t, Rules{Allow: []string{"127.0.0.1"}})
	open.resolver = p.resolver
	if body, err := get(open.Client(), u); err != nil || body != "etcd keys" {
		t.Fatalf("GET %s with 127.0.0.1 allowed: %q, %v", u, body, err)
	}
}

// A redirect is followed only to an allowed address: a literal private
// address is refused by its URL, a name that resolves to one when the
// connection is made, tock's own address by its port (also when a name
// leads there).
func TestClientRedirects(t *testing.T) {
	own := newTarget(t, nil)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	p := newPolicy(t, Rules{Allow: []string{"127.0.0.1"}, Own: []Own{{What: "etcd", Addr: "127.0.0.1:" + own.port}}})
	p.resolver = fakeResolver(map[string]netip.Addr{
		"private.example.com": netip.MustParseAddr("10.20.30.40"),
		"own.example.com":     netip.MustParseAddr("127.0.0.1"),
	})
	c := p.Client()
	for to, want := range map[string]string{
		"http://10.1.2.3:" + tg.port + "/":               "refused: 10.1.2.3 is a private address",
		"http://private.example.com:" + tg.port + "/":    "refused: 10.20.30.40 is a private address",
		"http://[::1]:" + tg.port + "/":                  "refused: ::1 is a loopback address",
		"http://169.254.169.254/latest/meta-data/":       "refused: 169.254.169.254 is a cloud metadata address",
		"http://127.0.0.1:" + own.port + "/v3/kv/range":  "refused: 127.0.0.1:" + own.port + " is tock's own etcd",
		"http://own.example.com:" + own.port + "/v3/kv/": "refused: 127.0.0.1:" + own.port + " is tock's own etcd",
		"http://u:p@127.0.0.1:" + tg.port + "/":          "credentials",
		"http://127.1:" + tg.port + "/":                  "ambiguous numeric host",
		"http://[::ffff:127.0.0.1]:" + own.port + "/v3/": "is tock's own etcd",
	} {
		u := tg.URL + "/?to=" + url.QueryEscape(to)
		_, err := get(c, u)
		if !IsRefusal(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("redirect to %s: %v, want %q", to, err, want)
		}
	}
	if n := own.hits.Load(); n != 0 {
		t.Errorf("tock's own address got %d requests, want none", n)
	}
	if body, err := get(c, tg.URL+"/?to="+url.QueryEscape(tg.URL+"/end")); err != nil || body != "ok" {
		t.Errorf("redirect to an allowed address: %q, %v", body, err)
	}
}

// At most MaxRedirects redirects are followed.
func TestClientRedirectLimit(t *testing.T) {
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if n > 0 {
			http.Redirect(w, r, "/"+strconv.Itoa(n-1), http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	c := newPolicy(t, Rules{Allow: []string{"127.0.0.1"}}).Client()
	if body, err := get(c, tg.URL+"/"+strconv.Itoa(MaxRedirects)); err != nil || body != "done" {
		t.Errorf("%d redirects: %q, %v; want followed", MaxRedirects, body, err)
	}
	if _, err := get(c, tg.URL+"/"+strconv.Itoa(MaxRedirects+1)); !IsRefusal(err) || !strings.Contains(err.Error(), "more than 5 redirects") {
		t.Errorf("%d redirects: %v, want refused", MaxRedirects+1, err)
	}
}
