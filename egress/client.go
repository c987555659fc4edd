package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// MaxRedirects is the most redirects Client follows for one request.
const MaxRedirects = 5

// Client returns an http.Client that calls only what p allows:
//
//   - every request's URL, the first and each redirect's, passes
//     CheckURL;
//   - every connection's address passes the address rules as it is
//     made, after DNS: a name that resolves, or is rebound, to a refused
//     address is refused, whatever CheckURL thought of the name;
//   - at most MaxRedirects redirects are followed;
//   - no proxy is used (the proxy's address, not the target's, would be
//     the one checked).
//
// A refused call fails with an error that wraps a *Refusal.
func (p *Policy) Client() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.dialContext
	return &http.Client{Transport: &guard{policy: p, next: t}, CheckRedirect: checkRedirect}
}

// guard checks each request's URL before its transport sends it.
type guard struct {
	policy *Policy
	next   http.RoundTripper
}

// RoundTrip refuses req if its URL is refused, else sends it.
func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.policy.CheckURL(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return g.next.RoundTrip(req)
}

// checkRedirect stops after MaxRedirects redirects; the redirect's URL
// is checked by guard, its address by the dialer.
func checkRedirect(_ *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return refuse("more than %d redirects", MaxRedirects)
	}
	return nil
}

// dialContext dials addr with a dialer whose Control checks the address
// of each connection before it is made: the resolved IP and port, plus
// the host name dialled, for the allow and deny lists' names.
func (p *Policy) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	name := normalName(host)
	if _, err := netip.ParseAddr(name); err == nil {
		name = "" // a literal: no name to match
	}
	d := &net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("egress: connect to %s: %w", address, err)
			}
			return p.checkAddr(name, ap)
		},
	}
	if p != nil {
		d.Resolver = p.resolver
	}
	return d.DialContext(ctx, network, addr)
}
