// Package egress decides which addresses tock may call on a job's
// behalf, and gives the built-in HTTP handler an http.Client that keeps
// to it where it counts: at connect time, on the address DNS returned.
//
// A job is user input that makes tock call out. Without rules a job could
// read tock's own etcd (http://127.0.0.1:2379/v3/kv/range) or a cloud
// metadata service and get the answer back as its output. A Policy
// refuses, by default, loopback, private, link-local, unique-local,
// shared (CGNAT), unspecified, multicast, reserved and metadata addresses,
// in every spelling (IPv4-mapped IPv6 is its IPv4 address; numeric hosts
// other than a dotted quad, such as 127.1 or 0x7f000001, are refused
// outright), and always refuses tock's own addresses.
//
// Checking a URL's host is only an early, friendly refusal (the API uses
// it when a job is created): a name can resolve, or be rebound, to any
// address. The guard that holds is Client's, which checks the address of
// every connection as it is made, for the first request and every
// redirect.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Rules configure a Policy. The zero value refuses every address in the
// default-refused ranges and allows the rest.
//
// The order of the rules: tock's own addresses (Own) are refused always;
// then Deny refuses; then Allow allows; then the default ranges are
// refused, unless AllowPrivate opens them; anything else is allowed.
type Rules struct {
	// AllowPrivate opens the default-refused ranges except the metadata
	// services (169.254.169.254 and its kin, metadata.google.internal):
	// loopback, private, link-local, unique-local and the rest. It is
	// tockd dev's default, where a developer's targets are local.
	AllowPrivate bool
	// Allow lists CIDRs ("10.1.0.0/16"), IP addresses and host names
	// ("hooks.internal", "*.corp.example" for its subdomains) that may be
	// called even if they are in a default-refused range. A host name
	// allowed here may resolve to any address but tock's own.
	Allow []string
	// Deny lists CIDRs, IP addresses and host names refused besides the
	// default ranges, even when Allow or AllowPrivate would open them.
	Deny []string
	// Own are tock's own services (etcd, NATS, PostgreSQL, the API),
	// refused always, by address and port: a loopback API on
	// 127.0.0.1:8080 refuses 127.0.0.1:8080 but not 127.0.0.1:9000.
	Own []Own
}

// Own is one of tock's own addresses.
type Own struct {
	// What names it in a refusal: "etcd", "NATS", "PostgreSQL", "API".
	What string
	// Addr is host:port. The host may be an IP address, a name (New
	// resolves it once; a connection to one of its addresses, or a URL
	// naming it, is refused) or empty or unspecified, as in a listen
	// address (":8080"): then every address of this machine is meant.
	// A loopback host stands for all of loopback.
	Addr string
}

// Policy says which addresses may be called. Build one with New; a nil
// *Policy is the zero Rules' policy. It is safe for concurrent use.
type Policy struct {
	allowPrivate bool
	allow, deny  list
	own          []ownAddr
	// local are this machine's addresses, for Own addresses with an
	// unspecified host.
	local []netip.Addr
	// resolver is the connect-time dialer's (nil: net.DefaultResolver);
	// tests set it.
	resolver *net.Resolver
}

// ownLookupTimeout bounds New's resolution of each Own host name.
const ownLookupTimeout = 3 * time.Second

// New builds the Policy of r. It resolves the host names of r.Own once,
// with ctx; a name that does not resolve is still refused by name. It
// fails if an entry of r.Allow, r.Deny or r.Own cannot be read.
func New(ctx context.Context, r Rules) (*Policy, error) {
	p := &Policy{allowPrivate: r.AllowPrivate}
	var err error
	if p.allow, err = parseList(r.Allow); err != nil {
		return nil, fmt.Errorf("egress: allow list: %w", err)
	}
	if p.deny, err = parseList(r.Deny); err != nil {
		return nil, fmt.Errorf("egress: deny list: %w", err)
	}
	for _, o := range r.Own {
		oa, err := parseOwn(ctx, o)
		if err != nil {
			return nil, err
		}
		p.own = append(p.own, oa)
		if oa.anyLocal && p.local == nil {
			p.local = localAddrs()
		}
	}
	return p, nil
}

// Refusal is the error of a call a Policy does not allow. No retry can
// change it.
type Refusal struct {
	// Reason says what was refused and why: "10.0.0.5 is a private
	// address".
	Reason string
	// Allowable says that an allow rule could open it, which the error
	// message then says (naming tockd's --http-allow).
	Allowable bool
}

// Error is "refused: <reason>", with a hint when an allow rule could
// open it.
func (r *Refusal) Error() string {
	if r.Allowable {
		return "refused: " + r.Reason + " (allow it with --http-allow)"
	}
	return "refused: " + r.Reason
}

// IsRefusal reports whether err is, or wraps, a *Refusal.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

func refuse(format string, args ...any) *Refusal {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// CheckURL refuses a URL the Policy does not allow by its text alone: a
// scheme other than http and https, credentials (user:password@), a
// numeric host that is not a plain IP address (127.1, 0x7f000001,
// 2130706433, 0177.0.0.1: resolvers disagree on what they mean), an IP
// address the rules refuse, and a host name they refuse (tock's own,
// a denied one, a metadata service's, localhost). A name that passes may
// still resolve to a refused address: Client checks that at connect time.
func (p *Policy) CheckURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return refuse("scheme %q: only http and https URLs may be called", u.Scheme)
	}
	if u.User != nil {
		return refuse("the URL carries credentials (user:password@); send them in a header instead")
	}
	host := normalName(u.Hostname())
	if host == "" {
		return refuse("the URL has no host")
	}
	port, err := urlPort(u)
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.checkAddr("", netip.AddrPortFrom(a, port))
	}
	if numericHost(host) {
		return refuse("%s is an ambiguous numeric host: write an IP address as four decimal numbers (127.0.0.1) or in brackets for IPv6", host)
	}
	return p.checkName(host, port)
}

// urlPort is u's port, or its scheme's.
func urlPort(u *url.URL) (uint16, error) {
	s := u.Port()
	if s == "" {
		if u.Scheme == "https" {
			return 443, nil
		}
		return 80, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, refuse("port %q is not a port number", s)
	}
	return uint16(n), nil
}

// checkName refuses the host name name (normalised) on port by the name
// rules: tock's own names, denied names, then, unless allowed, metadata
// service names and localhost.
func (p *Policy) checkName(name string, port uint16) error {
	if p == nil {
		p = &Policy{}
	}
	for _, o := range p.own {
		if o.matchName(name, port) {
			return refuse("%s:%d is tock's own %s", name, port, o.what)
		}
	}
	if p.deny.matchName(name) {
		return refuse("%s is denied (--http-deny)", name)
	}
	if p.allow.matchName(name) {
		return nil
	}
	switch {
	case metadataNames[name]:
		return &Refusal{Reason: name + " is a cloud metadata service", Allowable: true}
	case isLocalhost(name) && !p.allowPrivate && !p.allow.matchAddr(ipv4Loopback) && !p.allow.matchAddr(netip.IPv6Loopback()):
		// It resolves to loopback; when some of that is allowed, the
		// connect-time check decides.
		return &Refusal{Reason: name + " is a loopback name", Allowable: true}
	}
	return nil
}

// checkAddr refuses ap by the address rules: tock's own addresses, Deny,
// Allow (by address, or by name if name is the host name that resolved
// to it), then the default ranges. name is "" for an IP literal.
func (p *Policy) checkAddr(name string, ap netip.AddrPort) error {
	if p == nil {
		p = &Policy{}
	}
	a, port := canonical(ap.Addr()), ap.Port()
	for _, o := range p.own {
		if o.matchAddr(a, port, p.local) {
			return refuse("%s is tock's own %s", netip.AddrPortFrom(a, port), o.what)
		}
	}
	if p.deny.matchAddr(a) || (name != "" && p.deny.matchName(name)) {
		return refuse("%s is denied (--http-deny)", a)
	}
	if p.allow.matchAddr(a) || (name != "" && p.allow.matchName(name)) {
		return nil
	}
	what, metadata := classify(a)
	if what == "" || (p.allowPrivate && !metadata) {
		return nil
	}
	return &Refusal{Reason: a.String() + " is " + what, Allowable: true}
}

var ipv4Loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// normalName is a host as the rules compare it: lower case, without a
// trailing dot.
func normalName(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// numericHost reports whether h, which is not an IP address netip reads,
// ends in a numeric label. DNS names never do (a top-level domain is not
// numeric), but C resolvers (inet_aton) read such hosts as addresses in
// odd spellings: 127.1, 0x7f000001, 2130706433, 0177.0.0.1.
func numericHost(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if rest, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// isLocalhost reports whether name is localhost or a name under it
// (RFC 6761: they resolve to loopback).
func isLocalhost(name string) bool {
	return name == "localhost" || strings.HasSuffix(name, ".localhost") ||
		name == "ip6-localhost" || name == "ip6-loopback"
}

// list is a parsed allow or deny list.
type list struct {
	prefixes []netip.Prefix
	names    []string // exact names
	suffixes []string // ".corp.example", from "*.corp.example"
}

// parseList reads CIDRs, IP addresses and host names.
func parseList(entries []string) (list, error) {
	var l list
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if pf, err := netip.ParsePrefix(e); err == nil {
			if pf.Addr().Is4In6() && pf.Bits() >= 96 {
				pf = netip.PrefixFrom(pf.Addr().Unmap(), pf.Bits()-96)
			}
			l.prefixes = append(l.prefixes, pf.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			a = canonical(a)
			l.prefixes = append(l.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		name := normalName(e)
		if !validName(strings.TrimPrefix(name, "*.")) || numericHost(name) {
			return list{}, fmt.Errorf("%q is not a CIDR, an IP address or a host name", e)
		}
		if rest, ok := strings.CutPrefix(name, "*"); ok {
			l.suffixes = append(l.suffixes, rest)
		} else {
			l.names = append(l.names, name)
		}
	}
	return l, nil
}

// validName reports whether s is made of DNS name characters.
func validName(s string) bool {
	if s == "" || strings.HasPrefix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789.-_") == ""
}

func (l list) matchAddr(a netip.Addr) bool {
	return slices.ContainsFunc(l.prefixes, func(p netip.Prefix) bool { return p.Contains(a) })
}

func (l list) matchName(name string) bool {
	return slices.Contains(l.names, name) ||
		slices.ContainsFunc(l.suffixes, func(s string) bool { return strings.HasSuffix(name, s) })
}

// ownAddr is a parsed Own.
type ownAddr struct {
	what string
	port uint16
	// name is the host name, if the host was one.
	name string
	// addrs are the host's addresses (resolved, for a name).
	addrs []netip.Addr
	// loopback: the host is loopback, which stands for all of it.
	loopback bool
	// anyLocal: the host is empty or unspecified, every local address.
	anyLocal bool
}

// parseOwn reads o, resolving its host name if it has one.
func parseOwn(ctx context.Context, o Own) (ownAddr, error) {
	host, portStr, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return ownAddr{}, fmt.Errorf("egress: tock's own %s address %q: %w", o.What, o.Addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return ownAddr{}, fmt.Errorf("egress: tock's own %s address %q: bad port", o.What, o.Addr)
	}
	oa := ownAddr{what: o.What, port: uint16(port)}
	host = normalName(host)
	if a, err := netip.ParseAddr(host); err == nil {
		a = canonical(a)
		oa.addrs = []netip.Addr{a}
		oa.loopback = a.IsLoopback()
		oa.anyLocal = a.IsUnspecified()
		return oa, nil
	}
	if host == "" {
		oa.anyLocal = true
		return oa, nil
	}
	oa.name = host
	oa.loopback = isLocalhost(host)
	lctx, cancel := context.WithTimeout(ctx, ownLookupTimeout)
	defer cancel()
	addrs, _ := net.DefaultResolver.LookupNetIP(lctx, "ip", host) // a name that does not resolve is refused by name
	for _, a := range addrs {
		a = canonical(a)
		oa.addrs = append(oa.addrs, a)
		oa.loopback = oa.loopback || a.IsLoopback()
	}
	return oa, nil
}

// matchAddr reports whether a connection to a:port reaches o. Loopback
// and unspecified destinations reach this machine.
func (o ownAddr) matchAddr(a netip.Addr, port uint16, local []netip.Addr) bool {
	if port != o.port {
		return false
	}
	switch {
	case slices.Contains(o.addrs, a):
		return true
	case (o.loopback || o.anyLocal) && (a.IsLoopback() || a.IsUnspecified()):
		return true
	case o.anyLocal:
		return slices.Contains(local, a)
	}
	return false
}

// matchName reports whether a URL to name:port names o.
func (o ownAddr) matchName(name string, port uint16) bool {
	if port != o.port {
		return false
	}
	return (o.name != "" && name == o.name) || ((o.loopback || o.anyLocal) && isLocalhost(name))
}

// localAddrs are the addresses of this machine's interfaces.
func localAddrs() []netip.Addr {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, ia := range ifAddrs {
		if n, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, canonical(a))
			}
		}
	}
	return out
}
