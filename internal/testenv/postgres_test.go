package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
)

// testSchema is a schema of one table holding id. id is in its
// migration too, so that each test gets a template of its own; Migrate
// appends a line to the file log each time it runs.
func testSchema(id, log string) Schema {
	return Schema{
		Migrations: fstest.MapFS{"00001_t.sql": {Data: []byte("CREATE TABLE t (id text); -- " + id)}},
		Migrate: func(ctx context.Context, url string) error {
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "CREATE TABLE t (id text)"); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1)", id); err != nil {
				return err
			}
			f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = fmt.Fprintln(f, "migrated", os.Getpid())
			return err
		},
	}
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkCopy fails unless the database at url holds testSchema's table.
func checkCopy(t testing.TB, url, id string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var got string
	if err := conn.QueryRow(ctx, "SELECT id FROM t").Scan(&got); err != nil || got != id {
		t.Fatalf("copy of the template: %q, %v; want %q", got, err, id)
	}
}

// dropTemplateAtEnd drops template name when the test ends.
func dropTemplateAtEnd(t testing.TB, name string) {
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := connectAdmin(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		id := pgx.Identifier{name}.Sanitize()
		_, _ = conn.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE false")
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
}

// logLines counts the lines of file log.
func logLines(t testing.TB, log string) int {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestPostgresFromChild is a test binary of TestPostgresFromConcurrently:
// it asks for three copies of the template at once.
func TestPostgresFromChild(t *testing.T) {
	id, log := os.Getenv("TOCK_TESTENV_TEMPLATE_ID"), os.Getenv("TOCK_TESTENV_TEMPLATE_LOG")
	if id == "" {
		t.Skip("run by TestPostgresFromConcurrently")
	}
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			checkCopy(t, PostgresFrom(t, testSchema(id, log)), id)
		})
	}
}

// Test binaries started at once (go test -p) build the template once,
// and all get copies of it.
func TestPostgresFromConcurrently(t *testing.T) {
	id, log := randomID(), t.TempDir()+"/migrations.log"
	name, err := templateName(testSchema(id, log).Migrations)
	if err != nil {
		t.Fatal(err)
	}
	dropTemplateAtEnd(t, name)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestPostgresFromChild$", "-test.count", "1")
			cmd.Env = append(os.Environ(), "TOCK_TESTENV_TEMPLATE_ID="+id, "TOCK_TESTENV_TEMPLATE_LOG="+log)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("child test binary: %v\n%s", err, out)
			}
		})
	}
	wg.Wait()
	checkCopy(t, PostgresFrom(t, testSchema(id, log)), id)
	if n := logLines(t, log); n != 1 {
		t.Fatalf("the template was migrated %d times, want once", n)
	}
	// Nobody may connect to the template: CREATE DATABASE ... TEMPLATE
	// would fail while someone is.
	ctx := context.Background()
	conn, err := connectAdmin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var isTmpl, allowConn bool
	if err := conn.QueryRow(ctx, "SELECT datistemplate, datallowconn FROM pg_database WHERE datname = $1", name).Scan(&isTmpl, &allowConn); err != nil {
		t.Fatal(err)
	}
	if !isTmpl || allowConn {
		t.Errorf("template %s: is a template %v, allows connections %v; want true, false", name, isTmpl, allowConn)
	}
}

// A template that a build left unfinished (its binary killed half-way)
// is built again; one of a schema whose migrations changed is another.
func TestPostgresFromUnfinishedAndChanged(t *testing.T) {
	ctx := context.Background()
	id, log := randomID(), t.TempDir()+"/migrations.log"
	name, err := templateName(testSchema(id, log).Migrations)
	if err != nil {
		t.Fatal(err)
	}
	dropTemplateAtEnd(t, name)
	conn, err := connectAdmin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	checkCopy(t, PostgresFrom(t, testSchema(id, log)), id)
	if n := logLines(t, log); n != 1 {
		t.Fatalf("migrated %d times, want once", n)
	}

	id2 := randomID()
	name2, err := templateName(testSchema(id2, log).Migrations)
	if err != nil {
		t.Fatal(err)
	}
	if name2 == name {
		t.Fatalf("two schemas' templates are both named %s", name)
	}
	dropTemplateAtEnd(t, name2)
	checkCopy(t, PostgresFrom(t, testSchema(id2, log)), id2)
	if n := logLines(t, log); n != 2 {
		t.Fatalf("migrated %d times, want twice (once per schema)", n)
	}
}

// Building a template drops the other schemas' templates unused for
// templateTTL, and keeps the recent ones.
func TestPostgresFromDropsStaleTemplates(t *testing.T) {
	ctx := context.Background()
	conn, err := connectAdmin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	old, recent := templatePrefix+"old"+randomID(), templatePrefix+"new"+randomID()
	for name, used := range map[string]time.Time{old: time.Now().Add(-templateTTL - time.Minute), recent: time.Now()} {
		dropTemplateAtEnd(t, name)
		for _, sql := range []string{
			"CREATE DATABASE " + name,
			"ALTER DATABASE " + name + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false",
			"COMMENT ON DATABASE " + name + " IS " + quote(usedPrefix+used.UTC().Format(time.RFC3339)),
		} {
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
	}
	id, log := randomID(), t.TempDir()+"/migrations.log"
	name, err := templateName(testSchema(id, log).Migrations)
	if err != nil {
		t.Fatal(err)
	}
	dropTemplateAtEnd(t, name)
	checkCopy(t, PostgresFrom(t, testSchema(id, log)), id)
	for db, want := range map[string]bool{old: false, recent: true} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", db).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if (n == 1) != want {
			t.Errorf("template %s exists: %v, want %v", db, n == 1, want)
		}
	}
}
