package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultPostgresURL is the server tests create their databases on unless
// TOCK_TEST_POSTGRES_URL says otherwise.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Postgres creates an empty database for this test and returns its URL.
// The database is dropped when the test ends. It is for the tests that
// need no schema, or build it themselves (tests of migrations); a test
// that wants tock's schema asks PostgresFrom (store/storetest.URL) for a
// copy of a migrated database, which costs a fraction of migrating.
func Postgres(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := createDatabase(ctx, t, "")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Schema is a database schema that tests get ready-made: built once per
// Postgres server in a template database, then copied for each test.
type Schema struct {
	// Migrations are the files the schema is built from. A hash of their
	// names and contents names the template, so that a changed migration
	// gets a template of its own instead of a stale copy.
	Migrations fs.FS
	// Migrate builds the schema in the empty database at url. It must
	// close every connection it opens before it returns: Postgres copies
	// a database only while no one is connected to it.
	Migrate func(ctx context.Context, url string) error
}

// PostgresFrom creates a database for this test as a copy of schema's
// template database and returns its URL; it is dropped when the test
// ends.
//
// The first test on the server to ask for the template builds it, in
// whichever test binary it runs (go test runs packages' binaries in
// parallel): under a Postgres advisory lock, so that the others wait for
// it and then copy it. A template then takes no connections (ALLOW_CONNECTIONS
// false), since CREATE DATABASE ... TEMPLATE fails while anyone is
// connected to it. Whoever builds one drops the templates of other
// schemas unused for templateTTL: a binary whose template is dropped
// under it builds it again.
func PostgresFrom(t testing.TB, schema Schema) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name, err := templateName(schema.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	for try := 1; ; try++ {
		if err := templates.ensure(ctx, t, name, schema); err != nil {
			t.Fatal(err)
		}
		u, err := createDatabase(ctx, t, name)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "3D000" && try < 3 { // invalid_catalog_name: dropped as stale
			templates.forget(name)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
}

// Template databases are named templatePrefix and a hash of their
// schema's migrations. One that no test binary has used for templateTTL
// is dropped when another is built: two branches tested on one server
// keep theirs, a template of last week's migrations goes.
const (
	templatePrefix = "tock_tmpl_"
	templateTTL    = time.Hour
)

// lockTemplates is the advisory lock (a session lock, on the server's
// admin database) under which templates are built and dropped.
const lockTemplates int64 = 0x746f636b_74657374 // "tocktest"

// templateName names the template of the schema built from migrations.
func templateName(migrations fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return templatePrefix + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// templateSet remembers the templates this test binary has seen ready,
// so that its tests look each up once; mu makes a binary's parallel
// tests wait for the one that checks or builds it.
type templateSet struct {
	mu    sync.Mutex
	ready map[string]bool
}

var templates templateSet

func (ts *templateSet) forget(name string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.ready, name)
}

// ensure makes sure template name exists on the server, building it
// from schema if it does not.
func (ts *templateSet) ensure(ctx context.Context, t testing.TB, name string, schema Schema) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.ready[name] {
		return nil
	}
	conn, err := connectAdmin(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if ok, err := isTemplate(ctx, conn, name); err != nil || ok {
		if ok {
			ts.mark(name)
			err = markUsed(ctx, conn, name)
		}
		return err
	}
	// Closing conn (deferred) releases the lock too, on every path.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockTemplates); err != nil {
		return fmt.Errorf("lock test templates: %w", err)
	}
	// Another binary may have built it while this one waited.
	if ok, err := isTemplate(ctx, conn, name); err != nil || ok {
		if ok {
			ts.mark(name)
		}
		return err
	}
	if err := buildTemplate(ctx, conn, name, schema); err != nil {
		return err
	}
	ts.mark(name)
	dropStaleTemplates(ctx, t, conn, name)
	return nil
}

func (ts *templateSet) mark(name string) {
	if ts.ready == nil {
		ts.ready = map[string]bool{}
	}
	ts.ready[name] = true
}

// isTemplate reports whether template name is complete: it is marked a
// template only once its schema is built.
func isTemplate(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up test template %s: %w", name, err)
	}
	return ok, nil
}

// buildTemplate creates template name and builds schema in it; conn
// holds lockTemplates.
func buildTemplate(ctx context.Context, conn *pgx.Conn, name string, schema Schema) error {
	id := pgx.Identifier{name}.Sanitize()
	// What a build that died half-way left.
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop unfinished test template %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return fmt.Errorf("create test template %s: %w", name, err)
	}
	u, err := databaseURL(name)
	if err != nil {
		return err
	}
	if err := schema.Migrate(ctx, u); err != nil {
		return fmt.Errorf("build test template %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("mark test template %s: %w", name, err)
	}
	return markUsed(ctx, conn, name)
}

// usedPrefix begins a template's comment, which says when a test binary
// last used it.
const usedPrefix = "tock test template, last used "

// markUsed notes in template name's comment that it is used now (by the
// first test of a binary that asks for it).
func markUsed(ctx context.Context, conn *pgx.Conn, name string) error {
	used := time.Now().UTC().Format(time.RFC3339)
	if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+pgx.Identifier{name}.Sanitize()+" IS "+quote(usedPrefix+used)); err != nil {
		return fmt.Errorf("mark test template %s used: %w", name, err)
	}
	return nil
}

// dropStaleTemplates drops the templates of other schemas that no test
// binary has used for templateTTL (or whose last use is unknown); conn
// holds lockTemplates. It is housekeeping: a failure is logged, not fatal.
func dropStaleTemplates(ctx context.Context, t testing.TB, conn *pgx.Conn, keep string) {
	rows, err := conn.Query(ctx, `SELECT datname, coalesce(shobj_description(oid, 'pg_database'), '')
		FROM pg_database WHERE datname LIKE $1 AND datname <> $2`, strings.ReplaceAll(templatePrefix, "_", `\_`)+"%", keep)
	if err != nil {
		t.Logf("list old test templates: %v", err)
		return
	}
	var stale []string
	for rows.Next() {
		var name, comment string
		if err := rows.Scan(&name, &comment); err != nil {
			t.Logf("list old test templates: %v", err)
			return
		}
		used, err := time.Parse(time.RFC3339, strings.TrimPrefix(comment, usedPrefix))
		if err != nil || time.Since(used) > templateTTL {
			stale = append(stale, name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Logf("list old test templates: %v", err)
		return
	}
	for _, name := range stale {
		id := pgx.Identifier{name}.Sanitize()
		// A database marked a template cannot be dropped. DROP waits for
		// the copies being made of it; nothing else is connected to it.
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE false"); err != nil {
			t.Logf("drop old test template %s: %v", name, err)
			continue
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id); err != nil {
			t.Logf("drop old test template %s: %v", name, err)
		}
	}
}

// createDatabase creates a database for this test, a copy of template
// ("": Postgres's default, empty), dropped when the test ends, and
// returns its URL.
func createDatabase(ctx context.Context, t testing.TB, template string) (string, error) {
	conn, err := connectAdmin(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "tock_test_" + hex.EncodeToString(b[:])
	sql := "CREATE DATABASE " + name
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	// Postgres waits up to 5 s for the template's last sessions to end
	// (its builder's, closing) before it fails with object_in_use.
	for try := 1; ; try++ {
		_, err = conn.Exec(ctx, sql)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55006" && try < 5 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		break
	}
	if err != nil {
		return "", fmt.Errorf("create test database from template %q: %w", template, err)
	}
	t.Cleanup(func() { dropDatabase(t, name) })
	return databaseURL(name)
}

func dropDatabase(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := connectAdmin(ctx)
	if err != nil {
		t.Logf("drop test database %s: %v", name, err)
		return
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Logf("drop test database %s: %v", name, err)
	}
}

// adminURL is the server's database tests connect to to create theirs.
func adminURL() string {
	if u := os.Getenv("TOCK_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

func connectAdmin(ctx context.Context) (*pgx.Conn, error) {
	admin := adminURL()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("connect to test postgres %s (set TOCK_TEST_POSTGRES_URL, or run make test which starts it): %w", admin, err)
	}
	return conn, nil
}

// databaseURL is the URL of database name on the admin URL's server.
func databaseURL(name string) (string, error) {
	u, err := url.Parse(adminURL())
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", adminURL(), err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
