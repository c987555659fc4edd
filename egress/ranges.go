package egress

import "net/netip"

// addrClass is a range of addresses the Policy refuses by default, and
// what to call it in a refusal.
type addrClass struct {
	prefix netip.Prefix
	// what completes "<address> is ...".
	what string
	// metadata: a cloud provider's instance metadata service, which
	// Rules.AllowPrivate does not open (only Rules.Allow does).
	metadata bool
}

// classes are the ranges refused by default, most specific first: the
// metadata services inside link-local and unique-local space come before
// those ranges. Everything else is public and allowed.
var classes = []addrClass{
	{prefix: netip.MustParsePrefix("169.254.169.254/32"), what: "a cloud metadata address", metadata: true},
	{prefix: netip.MustParsePrefix("fd00:ec2::254/128"), what: "a cloud metadata address", metadata: true},
	{prefix: netip.MustParsePrefix("100.100.100.200/32"), what: "a cloud metadata address", metadata: true},
	{prefix: netip.MustParsePrefix("0.0.0.0/8"), what: "an unspecified address"},
	{prefix: netip.MustParsePrefix("127.0.0.0/8"), what: "a loopback address"},
	{prefix: netip.MustParsePrefix("10.0.0.0/8"), what: "a private address"},
	{prefix: netip.MustParsePrefix("172.16.0.0/12"), what: "a private address"},
	{prefix: netip.MustParsePrefix("192.168.0.0/16"), what: "a private address"},
	{prefix: netip.MustParsePrefix("100.64.0.0/10"), what: "a shared (carrier-grade NAT) address"},
	{prefix: netip.MustParsePrefix("169.254.0.0/16"), what: "a link-local address"},
	{prefix: netip.MustParsePrefix("192.0.0.0/24"), what: "a reserved address"},
	{prefix: netip.MustParsePrefix("198.18.0.0/15"), what: "a reserved address"},
	{prefix: netip.MustParsePrefix("224.0.0.0/4"), what: "a multicast address"},
	{prefix: netip.MustParsePrefix("255.255.255.255/32"), what: "the broadcast address"},
	{prefix: netip.MustParsePrefix("240.0.0.0/4"), what: "a reserved address"},
	{prefix: netip.MustParsePrefix("::/128"), what: "an unspecified address"},
	{prefix: netip.MustParsePrefix("::1/128"), what: "a loopback address"},
	{prefix: netip.MustParsePrefix("fe80::/10"), what: "a link-local address"},
	{prefix: netip.MustParsePrefix("fec0::/10"), what: "a site-local address"},
	{prefix: netip.MustParsePrefix("fc00::/7"), what: "a unique-local address"},
	{prefix: netip.MustParsePrefix("ff00::/8"), what: "a multicast address"},
}

// IPv6 ranges that carry an IPv4 address, which decides where a
// connection really goes: IPv4-compatible (deprecated, ::a.b.c.d), NAT64
// (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
var (
	v4Compatible = netip.MustParsePrefix("::/96")
	nat64        = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour    = netip.MustParsePrefix("2002::/16")
)

// canonical is a without its zone and, for an IPv6 address that carries
// an IPv4 one (IPv4-mapped, IPv4-compatible, NAT64, 6to4), that IPv4
// address: [::ffff:127.0.0.1] is 127.0.0.1.
func canonical(a netip.Addr) netip.Addr {
	a = a.WithZone("").Unmap()
	if !a.Is6() {
		return a
	}
	b := a.As16()
	switch {
	case v4Compatible.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		return netip.AddrFrom4([4]byte(b[12:16]))
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16]))
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6]))
	}
	return a
}

// classify says which default-refused range a (canonical) is in: what
// to call it, and whether it is a metadata address; "" for a public
// address.
func classify(a netip.Addr) (what string, metadata bool) {
	for _, c := range classes {
		if c.prefix.Contains(a) {
			return c.what, c.metadata
		}
	}
	return "", false
}

// metadataNames are the host names of cloud metadata services, refused
// by name like their addresses.
var metadataNames = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
}
