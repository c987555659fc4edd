package node

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tock-sched/tock/egress"
)

// Default ports of tock's dependencies, for addresses that leave theirs
// out.
const (
	defaultEtcdPort     = "2379"
	defaultNATSPort     = "4222"
	defaultPostgresPort = "5432"
)

// httpPolicy is the node's egress policy for the http handler: cfg's
// rules, plus tock's own addresses (ownAddrs), refused whatever the rules
// say. The api role checks job URLs with it, the executor role every
// connection.
func httpPolicy(ctx context.Context, cfg Config) (*egress.Policy, error) {
	p, err := egress.New(ctx, egress.Rules{
		AllowPrivate: cfg.HTTPAllowPrivate,
		Allow:        cfg.HTTPAllow,
		Deny:         cfg.HTTPDeny,
		Own:          ownAddrs(cfg),
	})
	if err != nil {
		return nil, fmt.Errorf("--http-allow, --http-deny: %w", err)
	}
	return p, nil
}

// ownAddrs are tock's own addresses as cfg names them: the API's listen
// address, etcd's endpoints, NATS's URLs, PostgreSQL's hosts (not its
// Unix sockets), and cfg.HTTPOwn. An address that cannot be read is left
// out: the node's own connection to it fails, and says so, first.
func ownAddrs(cfg Config) []egress.Own {
	var own []egress.Own
	add := func(what, hostport string) {
		if _, _, err := net.SplitHostPort(hostport); err == nil {
			own = append(own, egress.Own{What: what, Addr: hostport})
		}
	}
	api := cfg.HTTPAddr
	if cfg.Listener != nil {
		api = cfg.Listener.Addr().String()
	}
	add("API", api)
	for _, e := range cfg.EtcdEndpoints {
		add("etcd", hostPort(e, defaultEtcdPort))
	}
	for _, u := range strings.Split(cfg.NATSURL, ",") {
		add("NATS", hostPort(strings.TrimSpace(u), defaultNATSPort))
	}
	if pc, err := pgxpool.ParseConfig(cfg.PostgresURL); err == nil {
		c := pc.ConnConfig.Config
		if !strings.HasPrefix(c.Host, "/") {
			add("PostgreSQL", net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))))
		}
		for _, f := range c.Fallbacks {
			if !strings.HasPrefix(f.Host, "/") {
				add("PostgreSQL", net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))))
			}
		}
	}
	return append(own, cfg.HTTPOwn...)
}

// hostPort is the host:port of an endpoint written as a URL
// (http://etcd-0:2379, nats://user:pw@nats:4222) or as host[:port], with
// port def if it has none.
func hostPort(endpoint, def string) string {
	if endpoint == "" {
		return ""
	}
	host := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return ""
		}
		host = u.Host
	}
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), def)
}
