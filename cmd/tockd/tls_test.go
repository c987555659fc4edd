package main

import (
	"strings"
	"testing"

	"github.com/tock-sched/tock/internal/testenv"
)

// Flags that cannot work stop tockd serve before it connects anywhere,
// saying which flags and why.
func TestServeRefusesIncompleteTLSAndCredentialFlags(t *testing.T) {
	t.Parallel()
	ca := testenv.NewCA(t, "tock")
	cert, key := ca.Server(t, "127.0.0.1")
	for _, tc := range []struct {
		name string
		set  func(*ServeCmd)
		want string
	}{
		{"cert without key", func(c *ServeCmd) { c.TLSCert = cert }, "--tls-cert and --tls-key go together"},
		{"key without cert", func(c *ServeCmd) { c.TLSKey = key }, "--tls-cert and --tls-key go together"},
		{"client CA without TLS", func(c *ServeCmd) { c.TLSClientCA = ca.CertFile }, "--tls-client-ca needs --tls-cert and --tls-key"},
		{"cert and key swapped", func(c *ServeCmd) { c.TLSCert, c.TLSKey = key, cert }, "--tls-cert, --tls-key:"},
		{"missing client CA file", func(c *ServeCmd) { c.TLSCert, c.TLSKey, c.TLSClientCA = cert, key, "/nonexistent/ca.pem" }, "--tls-client-ca: open /nonexistent/ca.pem"},
		{"NATS password without user", func(c *ServeCmd) { c.NATSPassword = "x" }, "--nats-password needs --nats-user"},
		{"two NATS credentials", func(c *ServeCmd) { c.NATSUser, c.NATSCredsFile = "u", cert }, "--nats-user, --nats-creds-file: give one way"},
		{"missing creds file", func(c *ServeCmd) { c.NATSCredsFile = "/nonexistent/tock.creds" }, "--nats-creds-file: open /nonexistent/tock.creds"},
		{"bad nkey seed file", func(c *ServeCmd) { c.NATSNkeySeedFile = cert }, "--nats-nkey-seed-file:"},
		{"NATS cert without key", func(c *ServeCmd) { c.NATSTLSCert = cert }, "--nats-tls-cert and --nats-tls-key go together"},
		{"NATS CA not PEM", func(c *ServeCmd) { c.NATSTLSCA = key }, "--nats-tls-ca: " + key + " holds no PEM certificate"},
		{"etcd user without password", func(c *ServeCmd) { c.EtcdUser = "tock" }, "--etcd-user and --etcd-password go together"},
		{"etcd TLS on an http endpoint", func(c *ServeCmd) { c.EtcdTLSCA = ca.CertFile }, "endpoint http://127.0.0.1:2379 is plain http; write it https://"},
		{"etcd key without cert", func(c *ServeCmd) { c.EtcdEndpoints = []string{"https://etcd:2379"}; c.EtcdTLSKey = key }, "--etcd-tls-cert and --etcd-tls-key go together"},
	} {
		c := ServeCmd{EtcdEndpoints: []string{"http://127.0.0.1:2379"}, Roles: []string{"api"}}
		tc.set(&c)
		_, err := c.config()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
