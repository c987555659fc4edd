package node

import (
	"strings"
	"testing"
)

func TestParseRoles(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string // Roles.String, or the error's text
	}{
		{[]string{"api", "scheduler", "executor", "recorder"}, "api,scheduler,executor,recorder"},
		{[]string{"recorder", "api", "api"}, "api,recorder"},
		{[]string{"executor"}, "executor"},
		{[]string{"api", "sheduler"}, `--roles: unknown role "sheduler" (want api, scheduler, executor, recorder)`},
	} {
		got, err := ParseRoles(tc.names)
		if err != nil {
			if err.Error() != tc.want {
				t.Errorf("ParseRoles(%v): %v, want %q", tc.names, err, tc.want)
			}
			continue
		}
		if got.String() != tc.want {
			t.Errorf("ParseRoles(%v) = %s, want %s", tc.names, got, tc.want)
		}
	}
	if AllRoles.String() != "api,scheduler,executor,recorder" || RolesOf(Role("nope")) != 0 {
		t.Errorf("AllRoles %s, RolesOf(nope) %d", AllRoles, RolesOf(Role("nope")))
	}
}

// validConfig is the smallest configuration of every role that validate
// accepts.
func validConfig() Config {
	return Config{PostgresURL: "postgres://db/tock", EtcdEndpoints: []string{"http://etcd:2379"}, NATSURL: "nats://nats:4222"}.WithDefaults()
}

func TestWithDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.NodeID == "" || c.HTTPAddr != "127.0.0.1:8080" || c.Cluster != "default" || c.Roles != AllRoles ||
		c.Buckets != 256 || c.LeaseTTL.Seconds() != 5 || c.StreamReplicas != 1 || c.Logger == nil {
		t.Errorf("defaults: %+v", c)
	}
	if c := (Config{NodeID: "n1", Roles: RolesOf(RoleExecutor), Buckets: 16}).WithDefaults(); c.NodeID != "n1" ||
		c.Roles != RolesOf(RoleExecutor) || c.Buckets != 16 {
		t.Errorf("defaults overrode what was set: %+v", c)
	}
}

func TestValidate(t *testing.T) {
	if c := validConfig(); c.validate() != nil {
		t.Fatalf("a valid configuration: %v", c.validate())
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no NATS", func(c *Config) { c.NATSURL = "" }, "NATS URL is required"},
		{"no Postgres for the api", func(c *Config) { c.PostgresURL = "" }, "need a PostgreSQL URL"},
		{"no etcd for the scheduler", func(c *Config) { c.Roles, c.EtcdEndpoints = RolesOf(RoleScheduler), nil }, "need etcd endpoints"},
		{"no buckets", func(c *Config) { c.Buckets = -1 }, "want at least 1"},
		{"6 stream replicas", func(c *Config) { c.StreamReplicas = 6 }, "--stream-replicas 6: want 1 to 5"},
		{"negative stream replicas", func(c *Config) { c.StreamReplicas = -1 }, "--stream-replicas -1: want 1 to 5"},
		{"negative concurrency", func(c *Config) { c.ExecutorConcurrency = -1 }, "may not be negative"},
		{"TLS cert without key", func(c *Config) { c.TLS.Cert = "c.pem" }, "--tls-cert and --tls-key go together"},
		{"NATS password without user", func(c *Config) { c.NATSAuth.Password = "x" }, "--nats-password needs --nats-user"},
		{"etcd user without password", func(c *Config) { c.EtcdAuth.User = "tock" }, "--etcd-user and --etcd-password go together"},
		{"JWT issuer without JWK Set", func(c *Config) { c.JWT.Issuer = "https://idp" }, "need --jwks-url"},
		{"JWK Set over plain http", func(c *Config) {
			c.JWT = JWTSettings{URL: "http://idp.example.com/jwks", Issuer: "i", Audience: "a"}
		}, "want an https:// URL"},
		{"profiler on an API that needs keys", func(c *Config) { c.Pprof = true }, "--metrics-addr"},
	} {
		c := validConfig()
		tc.change(&c)
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	// An executor alone needs neither PostgreSQL nor etcd.
	c := Config{Roles: RolesOf(RoleExecutor), NATSURL: "nats://nats:4222"}.WithDefaults()
	if err := c.validate(); err != nil {
		t.Errorf("executor only: %v", err)
	}
}
