package pgha

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tock-sched/tock/internal/embedded"
)

// Restorable is a PostgreSQL server of a test's own whose WAL is archived
// (a segment a second while it writes) beside a base backup, so that it
// can be rolled back to an earlier time: killed with SIGKILL, then started
// again on the same port from the backup with the archive replayed up to
// that time (point-in-time recovery). A database that lost its last
// seconds, as a promoted asynchronous standby or a restore hands one to
// its clients.
type Restorable struct {
	Port    int
	dir     string
	cred    *syscall.Credential
	cmd     *exec.Cmd
	exited  chan struct{}
	logFile *os.File
}

// StartRestorable initializes and starts a Restorable server with a
// database named db, takes its base backup, and stops it at the test's
// end. It fails the test if PostgreSQL's binaries are missing.
func StartRestorable(t testing.TB, db string) *Restorable {
	t.Helper()
	if _, err := os.Stat(filepath.Join(binDir(), "postgres")); err != nil {
		t.Fatalf("no PostgreSQL binaries in %s (TOCK_PG_BINDIR): %v", binDir(), err)
	}
	cred, err := credential()
	if err != nil {
		t.Fatal(err)
	}
	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tock-pitr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	r := &Restorable{Port: port, dir: dir, cred: cred}
	for _, d := range []string{dir, r.path("archive")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.run(t, "initdb", "-D", r.path("data"), "-U", "postgres", "--auth=trust", "--wal-segsize=1", "--no-sync")
	conf := fmt.Sprintf(`
port = %d
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
wal_level = replica
archive_mode = on
archive_command = 'cp %%p %s/%%f'
archive_timeout = '1s'
max_wal_senders = 4
fsync = off
max_connections = 100
`, port, dir, r.path("archive"))
	f, err := os.OpenFile(filepath.Join(r.path("data"), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(conf); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	r.start(t)
	t.Cleanup(r.stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	r.run(t, "pg_basebackup", "-D", r.path("base"), "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres",
		"-X", "stream", "-c", "fast", "--no-sync")
	return r
}

// URL is database db's URL.
func (r *Restorable) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", r.Port, db)
}

// RollBack kills the server (SIGKILL) and starts it again, on the same
// port, as it was at time to: its base backup with the archived WAL
// replayed up to the last commit before to, then promoted. Commits after
// to are lost, acknowledged or not. It returns once the server accepts
// writes.
func (r *Restorable) RollBack(t testing.TB, to time.Time) {
	t.Helper()
	// Everything written so far goes to the archive first, so that the
	// replay finds a commit after to (it stops there) whatever the timing.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r.archiveAll(t, ctx)
	r.stop()
	if err := os.RemoveAll(r.path("data")); err != nil {
		t.Fatal(err)
	}
	r.run(t, "cp", "-a", r.path("base"), r.path("data"))
	recovery := fmt.Sprintf(`
restore_command = 'cp %s/%%f %%p'
recovery_target_time = '%s'
recovery_target_inclusive = false
recovery_target_action = 'promote'
`, r.path("archive"), to.UTC().Format("2006-01-02 15:04:05.000000")+"+00")
	f, err := os.OpenFile(filepath.Join(r.path("data"), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(recovery); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	signal := filepath.Join(r.path("data"), "recovery.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r.cred != nil {
		if err := os.Chown(signal, int(r.cred.Uid), int(r.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	r.start(t)
	for {
		if conn, err := pgx.Connect(ctx, r.URL("postgres")); err == nil {
			var recovering bool
			err = conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering)
			conn.Close(ctx)
			if err == nil && !recovering {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the restored server did not accept writes within 2 minutes (log %s)", r.path("log"))
		case <-r.exited:
			t.Fatalf("the restored server exited (log %s)", r.path("log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// archiveAll switches to a new WAL segment and waits until the archiver
// has copied the one it closed.
func (r *Restorable) archiveAll(t testing.TB, ctx context.Context) {
	t.Helper()
	conn, err := pgx.Connect(ctx, r.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var seg string
	if err := conn.QueryRow(ctx, "SELECT pg_walfile_name(pg_switch_wal())").Scan(&seg); err != nil {
		t.Fatal(err)
	}
	for {
		var last *string
		if err := conn.QueryRow(ctx, "SELECT last_archived_wal FROM pg_stat_archiver").Scan(&last); err != nil {
			t.Fatal(err)
		}
		if last != nil && *last >= seg {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("WAL segment %s was not archived (log %s)", seg, r.path("log"))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *Restorable) path(name string) string { return filepath.Join(r.dir, name) }

// run runs one of PostgreSQL's programs (or cp) as the server's user.
func (r *Restorable) run(t testing.TB, prog string, args ...string) {
	t.Helper()
	bin := prog
	if prog != "cp" {
		bin = filepath.Join(binDir(), prog)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", prog, err, out)
	}
}

// start starts the server and waits until it accepts connections.
func (r *Restorable) start(t testing.TB) {
	t.Helper()
	log, err := os.OpenFile(r.path("log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	r.logFile = log
	r.cmd = exec.Command(filepath.Join(binDir(), "postgres"), "-D", r.path("data"))
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred, Setpgid: true}
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(r.cmd, r.exited)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if conn, err := pgx.Connect(ctx, r.URL("postgres")); err == nil {
			conn.Close(ctx)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("postgres did not start within a minute (log %s)", r.path("log"))
		case <-r.exited:
			// Still recovering (a restore) is not an exit; an exit is.
			t.Fatalf("postgres exited at start (log %s)", r.path("log"))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop kills the server and its processes (SIGKILL to its process
// group) and waits for it.
func (r *Restorable) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.exited
	r.cmd = nil
	if r.logFile != nil {
		_ = r.logFile.Close()
	}
}
