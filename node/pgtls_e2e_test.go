package node_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/internal/embedded"
	"github.com/tock-sched/tock/internal/testenv"
	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/store"
)

// tock's PostgreSQL connections keep --postgres-url's TLS settings
// (sslmode, sslrootcert, sslcert, sslkey): against a PostgreSQL server
// started for the test with ssl on and plain connections refused,
// tockd dev's database creation and store.Open (which serve, migrate,
// maintain and archive use) connect with sslmode=verify-full over TLS;
// with sslmode=disable, or a CA that did not sign the server's
// certificate, they are refused; a user that must log in with a client
// certificate gets in with sslcert and sslkey and not without.
func TestPostgresSSL(t *testing.T) {
	t.Parallel()
	ca := testenv.NewCA(t, "pg")
	pg := startSSLPostgres(t, ca)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	pgURL := func(user, db string, params ...string) string {
		u := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s", user, pg.port, db)
		if len(params) > 0 {
			u += "?" + strings.Join(params, "&")
		}
		return u
	}
	verify := []string{"sslmode=verify-full", "sslrootcert=" + url.QueryEscape(ca.CertFile)}

	// tockd dev creates its database this way.
	if err := node.EnsureDatabase(ctx, pgURL("postgres", "tock", verify...)); err != nil {
		t.Fatalf("create the database over TLS: %v", err)
	}
	st, err := store.Open(ctx, pgURL("postgres", "tock", verify...))
	if err != nil {
		t.Fatalf("store.Open with sslmode=verify-full: %v", err)
	}
	var ssl bool
	var version string
	if err := st.Pool().QueryRow(ctx, "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl, &version); err != nil {
		t.Fatal(err)
	}
	if !ssl || (version != "TLSv1.2" && version != "TLSv1.3") {
		t.Errorf("connection: ssl %t, %s; want TLS 1.2 or 1.3", ssl, version)
	}
	if _, err := st.Pool().Exec(ctx, "CREATE ROLE certuser LOGIN"); err != nil {
		t.Fatal(err)
	}
	st.Close()

	other := testenv.NewCA(t, "other")
	cert, key := ca.Client(t, "certuser")
	for _, tc := range []struct {
		name, url, want string // want "" to connect
	}{
		{"sslmode=disable", pgURL("postgres", "tock", "sslmode=disable"), "no encryption"},
		{"another CA", pgURL("postgres", "tock", "sslmode=verify-full", "sslrootcert="+url.QueryEscape(other.CertFile)), "certificate signed by unknown authority"},
		{"client certificate", pgURL("certuser", "tock", append(slices.Clone(verify), "sslcert="+url.QueryEscape(cert), "sslkey="+url.QueryEscape(key))...), ""},
		{"no client certificate", pgURL("certuser", "tock", verify...), "valid client certificate"},
	} {
		st, err := store.Open(ctx, tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if st != nil {
			st.Close()
		}
	}
}

// sslPostgres is a PostgreSQL server for one test.
type sslPostgres struct{ port int }

// startSSLPostgres initialises and starts a PostgreSQL server of this
// machine's installation in a temporary directory, on a free port, with
// ca's certificate for 127.0.0.1, ssl on, and a pg_hba.conf that trusts
// TLS connections from 127.0.0.1 (but certuser's, which must present a
// certificate ca signed) and rejects every plain one. PostgreSQL refuses
// to run as root: as root, it runs as the user postgres that the
// PostgreSQL package creates (scripts/ensure-postgres.sh installs it).
func startSSLPostgres(t *testing.T, ca *testenv.CA) sslPostgres {
	t.Helper()
	bin := postgresBin(t)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs another user to run as, and there is no user postgres (scripts/ensure-postgres.sh installs PostgreSQL, which creates it): %v", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir: its parents are private to this user, and the
	// server may run as another.
	dir, err := os.MkdirTemp("", "tock-pg-ssl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	own := func(path string) {
		if cred != nil {
			if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	own(dir)
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return cmd
	}
	data := filepath.Join(dir, "data")
	// -N: no fsync, -A trust: the test's connections come over loopback.
	if out, err := run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "-N").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	cert, key := ca.Server(t, "127.0.0.1", "localhost")
	for dst, src := range map[string]string{"server.crt": cert, "server.key": key, "ca.crt": ca.CertFile} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(data, dst)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		own(path)
	}
	hba := filepath.Join(data, "pg_hba.conf")
	if err := os.WriteFile(hba, []byte(`local     all  all                    trust
hostssl   all  certuser  127.0.0.1/32  cert
hostssl   all  all       127.0.0.1/32  trust
hostnossl all  all       0.0.0.0/0     reject
`), 0o600); err != nil {
		t.Fatal(err)
	}
	own(hba)

	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := run("postgres", "-D", data, "-c", "port="+strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+dir, "-c", "ssl=on", "-c", "ssl_cert_file=server.crt",
		"-c", "ssl_key_file=server.key", "-c", "ssl_ca_file=ca.crt", "-c", "fsync=off", "-c", "max_connections=20")
	var log bytes.Buffer
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = srv.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("postgres log:\n%s", log.String())
		}
	})
	probe := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=require", port)
	testenv.WaitFor(t, 30*time.Second, "the test's PostgreSQL to accept connections", func() bool {
		select {
		case <-exited:
			t.Fatalf("postgres exited:\n%s", log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, probe)
		if err != nil {
			return false
		}
		conn.Close(ctx)
		return true
	})
	return sslPostgres{port: port}
}

// postgresBin is the directory of PostgreSQL's server programs (initdb,
// postgres). The test fails without them: scripts/ensure-postgres.sh,
// which make test runs, installs them.
func postgresBin(t *testing.T) string {
	t.Helper()
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	// Debian's layout, newest version first.
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	dirs = append(dirs, versions...)
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			return d
		}
	}
	t.Fatalf("no PostgreSQL server programs (initdb, postgres) in %v: run scripts/ensure-postgres.sh", dirs)
	return ""
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
