package egress

import (
	"context"
	"net/url"
	"strings"
	"testing"
)

// newPolicy is New(r), failing the test on error.
func newPolicy(t *testing.T, r Rules) *Policy {
	t.Helper()
	p, err := New(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkURL is p.CheckURL of raw: "" if allowed, else the error's text.
func checkURL(t *testing.T, p *Policy, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", raw, err)
	}
	if err := p.CheckURL(u); err != nil {
		if !IsRefusal(err) {
			t.Errorf("CheckURL(%s) = %v, not a *Refusal", raw, err)
		}
		return err.Error()
	}
	return ""
}

// The default policy (a nil *Policy) refuses every spelling of loopback,
// private, link-local, unique-local and metadata addresses, and allows
// public ones.
func TestCheckURLDefault(t *testing.T) {
	tests := []struct {
		url  string
		want string // a part of the refusal; "" for allowed
	}{
		// Loopback, in every spelling.
		{"http://127.0.0.1:2379/v3/kv/range", "127.0.0.1 is a loopback address"},
		{"http://127.0.0.1./", "127.0.0.1 is a loopback address"},
		{"http://127.255.255.254/", "is a loopback address"},
		{"http://127.1/", "127.1 is an ambiguous numeric host"},
		{"http://0x7f000001/", "0x7f000001 is an ambiguous numeric host"},
		{"http://0X7F000001/", "0x7f000001 is an ambiguous numeric host"},
		{"http://2130706433/", "2130706433 is an ambiguous numeric host"},
		{"http://0177.0.0.1/", "0177.0.0.1 is an ambiguous numeric host"},
		{"http://0x7f.0.0.1/", "is an ambiguous numeric host"},
		{"http://127.000.000.001/", "is an ambiguous numeric host"},
		{"http://[::1]:8080/", "::1 is a loopback address"},
		{"http://[::ffff:127.0.0.1]/", "127.0.0.1 is a loopback address"},
		{"http://[::ffff:7f00:1]/", "127.0.0.1 is a loopback address"},
		{"http://[0:0:0:0:0:ffff:127.0.0.1]/", "127.0.0.1 is a loopback address"},
		{"http://[::127.0.0.1]/", "127.0.0.1 is a loopback address"},
		{"http://[64:ff9b::7f00:1]/", "127.0.0.1 is a loopback address"},
		{"http://[2002:7f00:1::]/", "127.0.0.1 is a loopback address"},
		{"http://localhost:8080/", "localhost is a loopback name"},
		{"http://LocalHost./", "localhost is a loopback name"},
		{"http://api.localhost/", "api.localhost is a loopback name"},
		// Unspecified: connecting to it reaches this machine.
		{"http://0.0.0.0:2379/", "0.0.0.0 is an unspecified address"},
		{"http://0/", "0 is an ambiguous numeric host"},
		{"http://[::]/", ":: is an unspecified address"},
		// Private, shared, reserved.
		{"http://10.0.0.5/", "10.0.0.5 is a private address (allow it with --http-allow)"},
		{"http://172.16.0.1/", "172.16.0.1 is a private address"},
		{"http://172.31.255.255/", "is a private address"},
		{"http://192.168.1.10/", "192.168.1.10 is a private address"},
		{"http://[::ffff:10.0.0.5]/", "10.0.0.5 is a private address"},
		{"http://[::ffff:c0a8:10a]/", "192.168.1.10 is a private address"},
		{"http://100.64.0.1/", "100.64.0.1 is a shared (carrier-grade NAT) address"},
		{"http://198.18.0.1/", "is a reserved address"},
		{"http://240.0.0.1/", "is a reserved address"},
		{"http://255.255.255.255/", "255.255.255.255 is the broadcast address"},
		{"http://224.0.0.1/", "224.0.0.1 is a multicast address"},
		{"http://[ff02::1]/", "is a multicast address"},
		// Link-local and unique-local.
		{"http://169.254.1.1/", "169.254.1.1 is a link-local address"},
		{"http://[fe80::1]/", "fe80::1 is a link-local address"},
		{"http://[fe80::1%25eth0]/", "fe80::1 is a link-local address"},
		{"http://[fc00::1]/", "fc00::1 is a unique-local address"},
		{"http://[fd12:3456::1]/", "is a unique-local address"},
		// Metadata services, by address and by name.
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address"},
		{"http://[::ffff:169.254.169.254]/", "169.254.169.254 is a cloud metadata address"},
		{"http://[::ffff:a9fe:a9fe]/", "169.254.169.254 is a cloud metadata address"},
		{"http://0xa9fea9fe/", "is an ambiguous numeric host"},
		{"http://[fd00:ec2::254]/", "fd00:ec2::254 is a cloud metadata address"},
		{"http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal is a cloud metadata service"},
		{"http://METADATA.google.internal./", "metadata.google.internal is a cloud metadata service"},
		{"http://metadata/", "metadata is a cloud metadata service"},
		// Not addresses at all.
		{"http://user:secret@example.com/", "credentials"},
		{"https://user@example.com/", "credentials"},
		{"ftp://example.com/", `scheme "ftp"`},
		{"file:///etc/passwd", `scheme "file"`},
		{"gopher://127.0.0.1:2379/", `scheme "gopher"`},
		{"http://example.com:99999/", "is not a port number"},
		// Public: allowed.
		{"https://example.com/hook", ""},
		{"http://hooks.example.com:8443/x?token=y", ""},
		{"http://172.32.0.1/", ""},
		{"http://93.184.215.14/", ""},
		{"http://[2606:4700::1111]/", ""},
		{"http://[::ffff:93.184.215.14]/", ""},
		{"http://1e100.net/", ""},
		{"http://deadbeef/", ""},
		{"http://123.example.com/", ""},
	}
	for _, tc := range tests {
		got := checkURL(t, nil, tc.url)
		switch {
		case tc.want == "" && got != "":
			t.Errorf("CheckURL(%s) = %q, want allowed", tc.url, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("CheckURL(%s) = %q, want a refusal with %q", tc.url, got, tc.want)
		}
	}
}

// AllowPrivate opens private and loopback addresses, not metadata;
// Allow opens what it names; Deny wins over both; tock's own addresses
// are refused whatever the rules say, by address and port.
func TestCheckURLRules(t *testing.T) {
	own := []Own{
		{What: "etcd", Addr: "127.0.0.1:2379"},
		{What: "NATS", Addr: "localhost:4222"},
		{What: "PostgreSQL", Addr: "db.tock-test.invalid:5432"},
		{What: "API", Addr: ":8080"},
	}
	dev := newPolicy(t, Rules{AllowPrivate: true, Own: own, Deny: []string{"10.9.0.0/16", "blocked.example.com"}})
	strict := newPolicy(t, Rules{Own: own,
		Allow: []string{"127.0.0.0/8", "10.1.0.0/16", "hooks.internal", "*.corp.example", "169.254.169.254"},
		Deny:  []string{"203.0.113.0/24", "*.bad.example", "127.0.0.9"}})

	tests := []struct {
		p    *Policy
		url  string
		want string
	}{
		{dev, "http://127.0.0.1:9000/", ""},
		{dev, "http://localhost:9000/", ""},
		{dev, "http://10.0.0.5/", ""},
		{dev, "http://[fd12::1]/", ""},
		{dev, "http://169.254.169.254/", "is a cloud metadata address"},
		{dev, "http://metadata.google.internal/", "is a cloud metadata service"},
		{dev, "http://127.1/", "ambiguous numeric host"},
		{dev, "http://10.9.1.1/", "10.9.1.1 is denied"},
		{dev, "http://blocked.example.com/", "blocked.example.com is denied"},
		{dev, "http://user:pw@127.0.0.1:9000/", "credentials"},
		// Own, by address and port, in every spelling of loopback.
		{dev, "http://127.0.0.1:2379/v3/kv/range", "127.0.0.1:2379 is tock's own etcd"},
		{dev, "http://127.0.0.2:2379/", "127.0.0.2:2379 is tock's own etcd"},
		{dev, "http://[::1]:2379/", "[::1]:2379 is tock's own etcd"},
		{dev, "http://[::ffff:127.0.0.1]:2379/", "127.0.0.1:2379 is tock's own etcd"},
		{dev, "http://0.0.0.0:2379/", "0.0.0.0:2379 is tock's own etcd"},
		{dev, "http://localhost:2379/", "localhost:2379 is tock's own etcd"},
		{dev, "http://127.0.0.1:4222/", "127.0.0.1:4222 is tock's own NATS"},
		{dev, "http://localhost:4222/", "localhost:4222 is tock's own NATS"},
		{dev, "http://db.tock-test.invalid:5432/", "db.tock-test.invalid:5432 is tock's own PostgreSQL"},
		{dev, "http://db.tock-test.invalid:5433/", ""},
		{dev, "http://127.0.0.1:8080/", "127.0.0.1:8080 is tock's own API"},
		{dev, "http://localhost:8080/", "localhost:8080 is tock's own API"},
		{dev, "http://127.0.0.1/", ""},
		// Allow and deny lists.
		{strict, "http://127.0.0.1:9000/", ""},
		{strict, "http://127.0.0.1:2379/", "is tock's own etcd"},
		{strict, "http://127.0.0.9/", "127.0.0.9 is denied"},
		{strict, "http://[::1]:9000/", "::1 is a loopback address"},
		{strict, "http://10.1.2.3/", ""},
		{strict, "http://[::ffff:10.1.2.3]/", ""},
		{strict, "http://10.2.0.1/", "10.2.0.1 is a private address"},
		{strict, "http://169.254.169.254/", ""},
		{strict, "http://hooks.internal/", ""},
		{strict, "http://a.b.corp.example/", ""},
		{strict, "http://corp.example.evil.com/", ""},
		{strict, "http://203.0.113.7/", "203.0.113.7 is denied"},
		{strict, "http://x.bad.example/", "x.bad.example is denied"},
		{strict, "http://localhost:9000/", ""}, // the connect-time check decides
	}
	for _, tc := range tests {
		got := checkURL(t, tc.p, tc.url)
		switch {
		case tc.want == "" && got != "":
			t.Errorf("CheckURL(%s) = %q, want allowed", tc.url, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("CheckURL(%s) = %q, want a refusal with %q", tc.url, got, tc.want)
		}
	}
}

func TestNewRejectsBadEntries(t *testing.T) {
	for _, r := range []Rules{
		{Allow: []string{"not a host!"}},
		{Allow: []string{"10.0.0.0/33"}},
		{Deny: []string{"127.1"}},
		{Deny: []string{"*."}},
		{Own: []Own{{What: "etcd", Addr: "127.0.0.1"}}},
		{Own: []Own{{What: "etcd", Addr: "127.0.0.1:http"}}},
	} {
		if _, err := New(context.Background(), r); err == nil {
			t.Errorf("New(%+v) = nil error", r)
		}
	}
}
