#!/usr/bin/env bash
# seed-scale.sh: fill a tock database with a large, realistic data set for
# measuring the API (and a dashboard built on it) at scale.
#
#   scripts/seed-scale.sh DATABASE [JOBS] [EXECUTIONS_PER_DAY]
#
#   DATABASE            the database to create (must not exist yet, or hold no jobs)
#   JOBS                jobs to create (default 1,000,000)
#   EXECUTIONS_PER_DAY  history per day, about (default 200,000)
#
# Environment: PGBASE (default postgres://postgres@127.0.0.1:5432), SEED_DAYS
# (days of history, default 30), SEED_PARALLEL (concurrent history loaders,
# default 2), TOCK_BUCKETS (default 256, as tockd's).
#
# Default history: 200,000 executions a day, so 30 days hold about 5.5 million
# (measured: 5,536,088 executions, ~190,000 a day once the jobs exist, most
# being created in the first two days; plus 311,767 attempts rows, 15,483
# overlap skips and 1,078,491 audit entries; 3m44s on 2 cores). That is what one
# million jobs produce when, as in a typical installation, most run weekly or
# monthly: 100 jobs every 5 minutes (28,800 runs a day), 1,000 hourly (24,000),
# about 5 % daily, 60 % weekly, the rest monthly, and 2 % one-shot jobs that
# completed in the last 6 days. The daily share is derived from
# EXECUTIONS_PER_DAY (see "mix" below); paused jobs make the real figure a few
# percent lower. The history *is* the jobs' schedules: every execution is a
# scheduled time of its job's cron expression (in its time zone) between the
# job's creation and now (or its pause).
#
# How the database is made (the same way tockd makes its own):
#   * schema: a small Go program (written to a temporary directory and built
#     against this checkout) calls store.Open, store.Migrate and store.Init,
#     exactly what `tockd migrate` and every tockd start do; then the store's
#     own EnsureHistoryPartitions and MaintainAuditPartitions create the daily
#     partitions of executions, attempts and audit_log for the history's days.
#   * rows: set-based SQL (INSERT ... SELECT over generate_series), one
#     statement per day of history, SEED_PARALLEL days at a time, into tock's
#     tables with all of tock's indexes in place. Values are computed as tock
#     computes them: a job's bucket is FNV-1a(32) of its id's 16 bytes mod N
#     (domain.BucketOf), job ids are UUIDv7 of their creation time, execution
#     ids are domain.ExecutionID (scheduled ms + SHA-1(job id, scheduled ns)),
#     spec ids are specOf's UUIDv5; the first attempt lives inline in the
#     execution row, two or more in attempts (migration 5). The Go program
#     checks a sample of jobs and executions against domain.BucketOf,
#     domain.ExecutionID and the schedule package afterwards.
#   * then VACUUM (ANALYZE) of the whole database: ANALYZE because autovacuum
#     may be off, VACUUM because on a real cluster autovacuum would have
#     vacuumed these insert-only days, which sets the visibility map that
#     index-only scans (the statistics' covering index) depend on.
#
# A scheduler started on the result fires at the rate the history was made at
# (~2 a second by default): active jobs' next_run_at is their schedule's next
# time after the seeding, so nothing is due at once, except runs that came due
# between the seeding and tockd's start (each fires once, missed policy
# "latest"). A few dozen executions of the last two hours are "failed"
# (waiting for a retry that is due at once) and are re-dispatched on start.
# HTTP handlers point at hosts under .invalid, so they fail at once if fired.
# A tockd started long after the seeding first fires every job that came due
# meanwhile (once each): ~190,000 a day of delay.
#
# The Go toolchain (go) and psql must be on PATH. Prints each step's time.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 3 || "$1" == -* ]]; then
	sed -n '2,13p' "$0" >&2
	exit 2
fi
DB=$1
JOBS=${2:-1000000}
PER_DAY=${3:-200000}
DAYS=${SEED_DAYS:-30}
PAR=${SEED_PARALLEL:-2}
BUCKETS=${TOCK_BUCKETS:-256}
PGBASE=${PGBASE:-postgres://postgres@127.0.0.1:5432}
URL="$PGBASE/$DB?sslmode=disable"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[[ "$DB" =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "seed-scale: database name must match [a-z_][a-z0-9_]*" >&2; exit 2; }
[[ "$JOBS" =~ ^[0-9]+$ && "$JOBS" -ge 10000 ]] || { echo "seed-scale: JOBS must be a number >= 10000" >&2; exit 2; }
[[ "$PER_DAY" =~ ^[0-9]+$ ]] || { echo "seed-scale: EXECUTIONS_PER_DAY must be a number" >&2; exit 2; }

PSQL=(psql -X -q -v ON_ERROR_STOP=1 -P pager=off)
WORK=$(mktemp -d /tmp/seed-scale.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

declare -a SUMMARY=()
START=$(date +%s.%N)
step() {
	local name=$1
	shift
	local s e d
	s=$(date +%s.%N)
	echo "== $name"
	"$@"
	e=$(date +%s.%N)
	d=$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.1f", b - a }')
	echo "   ($name: ${d}s)"
	SUMMARY+=("$(printf '%-44s %8ss' "$name" "$d")")
}

# The schedule mix: F (every 5 min) and H (hourly) and O (one-shot) jobs are
# fixed shares; the rest R are daily, weekly or monthly, with the daily
# share fD chosen so that the total comes to about PER_DAY runs a day.
read -r FD FW < <(awk -v J="$JOBS" -v E="$PER_DAY" 'BEGIN {
	nF = int((J - 1) / 10000) + 1; nH = int((J - 501) / 1000) + 1; nO = int((J - 4) / 50) + 1
	# 8 % of the jobs are paused, half-way through their life on average:
	# ask the others for 4 % more.
	R = J - nF - nH - nO; r = (E / 0.96 - 288 * nF - 24 * nH) / R; m = 1 / 30.44; w = 1 / 7
	if (r <= m) { fd = 0; fw = 0 }
	else if (r <= 0.6 * w + 0.4 * m) { fd = 0; fw = (r - m) / (w - m) }
	else if (r <= 0.4 + 0.6 * w) { fw = 0.6; fd = (r - 0.6 * w - 0.4 * m) / (1 - m) }
	else { fd = (r - w) / (1 - w); if (fd > 1) fd = 1; fw = 1 - fd }
	printf "%.6f %.6f\n", fd, fw }')
echo "seed-scale: $JOBS jobs into $DB, ~$PER_DAY executions/day for $DAYS days (daily share $FD, weekly $FW of the cron jobs)"

# --- the Go helper: schema, partitions, and the final check ------------------
cat >"$WORK/main.go" <<'GO'
// Seed helper for scripts/seed-scale.sh: runs the store's own migration and
// partitioning, and checks seeded rows against the domain's functions.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"
	_ "time/tzdata" // zones as tockd has them, whatever the host has

	"github.com/google/uuid"

	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/schedule"
	"github.com/tock-sched/tock/store"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "seed helper:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	ctx := context.Background()
	st, err := store.Open(ctx, args[1])
	if err != nil {
		return err
	}
	defer st.Close()
	switch args[0] {
	case "prepare": // prepare URL BUCKETS FROM NOW
		buckets, _ := strconv.Atoi(args[2])
		from, err1 := time.Parse(time.RFC3339, args[3])
		now, err2 := time.Parse(time.RFC3339, args[4])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad times %q %q", args[3], args[4])
		}
		if err := st.Migrate(ctx); err != nil {
			return err
		}
		n, err := st.Init(ctx, buckets)
		if err != nil {
			return err
		}
		var days []time.Time
		for d := from.UTC().Truncate(24 * time.Hour); !d.After(now); d = d.AddDate(0, 0, 1) {
			days = append(days, d)
		}
		if err := st.EnsureHistoryPartitions(ctx, days...); err != nil {
			return err
		}
		for _, d := range days {
			if _, err := st.MaintainAuditPartitions(ctx, d, 1, 0); err != nil {
				return err
			}
		}
		fmt.Printf("migrated; %d buckets; history partitions %s to %s\n", n,
			days[0].Format(time.DateOnly), days[len(days)-1].Format(time.DateOnly))
		return nil
	case "verify": // verify URL NOW SAMPLE
		now, err := time.Parse(time.RFC3339, args[2])
		if err != nil {
			return err
		}
		sample, _ := strconv.Atoi(args[3])
		return verify(ctx, st, now, sample)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// verify checks sample random jobs: bucket, next run, and that their
// executions (and overlap skips) are exactly their schedule's runs from
// creation to now (or the pause), with domain.ExecutionID ids.
func verify(ctx context.Context, st *store.Store, now time.Time, sample int) error {
	pool := st.Pool()
	var n int
	if err := pool.QueryRow(ctx, "SELECT buckets FROM cluster").Scan(&n); err != nil {
		return err
	}
	rows, err := pool.Query(ctx, `SELECT id, bucket, schedule, state, next_run_at, paused_next_run_at, created_at,
		updated_at, last_run_at, runs FROM jobs TABLESAMPLE BERNOULLI (1) ORDER BY random() LIMIT $1`, sample)
	if err != nil {
		return err
	}
	type job struct {
		id                         uuid.UUID
		bucket                     int
		spec                       []byte
		state                      string
		next, pausedNext, lastRun  *time.Time
		created, updated           time.Time
		runs                       int64
	}
	var jobs []job
	for rows.Next() {
		var j job
		if err := rows.Scan(&j.id, &j.bucket, &j.spec, &j.state, &j.next, &j.pausedNext, &j.created, &j.updated,
			&j.lastRun, &j.runs); err != nil {
			return err
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	bad, execs := 0, 0
	fail := func(j job, format string, a ...any) {
		bad++
		if bad <= 20 {
			fmt.Printf("  MISMATCH job %s (%s): %s\n", j.id, j.spec, fmt.Sprintf(format, a...))
		}
	}
	eq := func(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }
	for _, j := range jobs {
		if b := domain.BucketOf(j.id, n); b != j.bucket {
			fail(j, "bucket %d, domain.BucketOf says %d", j.bucket, b)
		}
		var spec schedule.Spec
		if err := json.Unmarshal(j.spec, &spec); err != nil {
			return err
		}
		sch, err := schedule.Compile(spec)
		if err != nil {
			fail(j, "schedule does not compile: %v", err)
			continue
		}
		var want []time.Time
		if sch.Recurring() {
			end := now
			if j.state == "paused" {
				end = j.updated
				if next, _ := sch.Next(j.updated); !eq(j.pausedNext, &next) {
					fail(j, "paused_next_run_at %v, schedule says %v", j.pausedNext, next)
				}
			} else if next, _ := sch.Next(now); !eq(j.next, &next) {
				fail(j, "next_run_at %v, schedule says %v", j.next, next)
			}
			want, _ = sch.Between(j.created, end, 1<<20)
		} else {
			want = []time.Time{*spec.At}
		}
		got := map[int64]bool{}
		er, err := pool.Query(ctx, `SELECT id, scheduled_for FROM executions WHERE job_id = $1`, j.id)
		if err != nil {
			return err
		}
		var fired int64
		var last *time.Time
		for er.Next() {
			var id uuid.UUID
			var t time.Time
			if err := er.Scan(&id, &t); err != nil {
				return err
			}
			if id != domain.ExecutionID(j.id, t) {
				fail(j, "execution %s at %s: domain.ExecutionID says %s", id, t, domain.ExecutionID(j.id, t))
			}
			got[t.UnixMilli()] = true
			fired++
			execs++
			if last == nil || t.After(*last) {
				tt := t
				last = &tt
			}
		}
		if err := er.Err(); err != nil {
			return err
		}
		var skips []time.Time
		sr, err := pool.Query(ctx, `SELECT first_at FROM skipped_runs WHERE job_id = $1`, j.id)
		if err != nil {
			return err
		}
		for sr.Next() {
			var t time.Time
			if err := sr.Scan(&t); err != nil {
				return err
			}
			skips = append(skips, t)
		}
		for _, t := range skips {
			got[t.UnixMilli()] = true
		}
		for _, t := range want {
			if !got[t.UnixMilli()] {
				fail(j, "scheduled time %s has no execution", t.UTC().Format(time.RFC3339))
				break
			}
		}
		if len(got) != len(want) {
			fail(j, "%d executions and skips, the schedule has %d runs", len(got), len(want))
		}
		if fired != j.runs || !eq(last, j.lastRun) {
			fail(j, "runs %d last_run_at %v, executions say %d and %v", j.runs, j.lastRun, fired, last)
		}
	}
	fmt.Printf("checked %d jobs and their %d executions against domain.BucketOf, domain.ExecutionID and the schedule: %d mismatches\n",
		len(jobs), execs, bad)
	if bad > 0 {
		return fmt.Errorf("%d mismatches", bad)
	}
	return nil
}
GO

build_helper() {
	(cd "$ROOT" && go build -o "$WORK/seedhelper" "$WORK/main.go")
}

create_db() {
	local exists
	exists=$("${PSQL[@]}" -d "$PGBASE/postgres?sslmode=disable" -Atc "SELECT 1 FROM pg_database WHERE datname = '$DB'")
	if [[ -z "$exists" ]]; then
		"${PSQL[@]}" -d "$PGBASE/postgres?sslmode=disable" -c "CREATE DATABASE $DB"
		echo "   created database $DB"
	else
		local jobs
		jobs=$("${PSQL[@]}" -d "$URL" -Atc "SELECT CASE WHEN to_regclass('public.job_names') IS NULL THEN 0 ELSE (SELECT count(*) FROM (SELECT 1 FROM job_names LIMIT 1) x) END")
		if [[ "$jobs" != 0 ]]; then
			echo "seed-scale: database $DB already holds jobs; drop it first (dropdb $DB)" >&2
			exit 1
		fi
		echo "   database $DB exists and holds no jobs"
	fi
}

# The seeding's clock: the database's, to the second. History ends here.
seed_clock() {
	read -r NOW FROM < <("${PSQL[@]}" -d "$URL" -AtF ' ' -c "SET TIME ZONE 'UTC'; SELECT to_char(t, 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), to_char(t - make_interval(days => $DAYS), 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM date_trunc('second', now()) t")
	echo "   history from $FROM to $NOW"
}

prepare() {
	"$WORK/seedhelper" prepare "$URL" "$BUCKETS" "$FROM" "$NOW"
}

# Helper functions (schema tock_seed, dropped at the end) and the jobs to
# create, computed once into tock_seed.j.
seed_functions() {
	"${PSQL[@]}" -d "$URL" <<'SQL'
CREATE SCHEMA tock_seed;
-- pgcrypto for SHA-1 (execution and spec ids), in tock_seed unless the
-- database has it already.
DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pgcrypto') THEN
		CREATE EXTENSION pgcrypto SCHEMA tock_seed;
	END IF;
END $$;
SELECT format('ALTER DATABASE %I SET search_path = "$user", public, tock_seed, %I', current_database(), n.nspname)
FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcrypto' \gexec
SQL
	"${PSQL[@]}" -d "$URL" <<'SQL'
-- A uniform number in [0, 1) from (i, salt): deterministic.
CREATE FUNCTION tock_seed.u(i bigint, salt int) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT (hashint8(i * 1000 + salt) & 2147483647)::float8 / 2147483648 $$;
CREATE FUNCTION tock_seed.u3(a bigint, b bigint, salt int) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT (hashint8(a * 1000003 + b * 31 + salt) & 2147483647)::float8 / 2147483648 $$;

-- domain.BucketOf: FNV-1a (32 bit) of the id's 16 bytes, modulo n.
CREATE FUNCTION tock_seed.bucket_of(id uuid, n int) RETURNS int LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE b bytea := uuid_send(id); h bigint := 2166136261;
BEGIN
	FOR k IN 0..15 LOOP h := ((h # get_byte(b, k)) * 16777619) & 4294967295; END LOOP;
	RETURN (h % n)::int;
END $$;

-- A UUIDv7 of time t whose random bits come from md5(seed).
CREATE FUNCTION tock_seed.uuid7(t timestamptz, seed text) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7' || substr(m, 1, 3)
		|| to_hex(8 + (('x' || substr(m, 4, 1))::bit(4)::int & 3)) || substr(m, 5, 15))::uuid
	FROM md5(seed) m $$;

-- domain.ExecutionID: scheduled ms in the first 48 bits, then
-- SHA-1(job id, scheduled time in ns) with version 8 and the RFC variant.
CREATE FUNCTION tock_seed.exec_id(job uuid, t timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT encode(substring(int8send((extract(epoch FROM t) * 1000)::bigint) FROM 3 FOR 6)
		|| set_byte(set_byte(substring(d FROM 7 FOR 10), 0, (get_byte(d, 6) & 15) | 128), 2, (get_byte(d, 8) & 63) | 128), 'hex')::uuid
	FROM (SELECT digest(uuid_send(job) || int8send((extract(epoch FROM t) * 1000000)::bigint * 1000), 'sha1') AS d) x $$;

-- store's specOf: UUIDv5 (SHA-1) in specNamespace of
-- "len:handler len:payload len:retry len:timeout" (lengths in bytes).
CREATE FUNCTION tock_seed.spec_id(h text, p text, r text, timeout_ms bigint) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT encode(set_byte(set_byte(substring(d FROM 1 FOR 16), 6, (get_byte(d, 6) & 15) | 80), 8, (get_byte(d, 8) & 63) | 128), 'hex')::uuid
	FROM (SELECT digest(uuid_send('6f2b1c3e-8d4a-5b7c-9e0f-1a2b3c4d5e6f'::uuid) || convert_to(
		octet_length(h) || ':' || h || coalesce(octet_length(p), 0) || ':' || coalesce(p, '') ||
		octet_length(r) || ':' || r || length(timeout_ms::text) || ':' || timeout_ms, 'UTF8'), 'sha1') AS d) x $$;

-- The first run strictly after "after" of the cron kinds the seed uses, in
-- zone tz: F "S */5 * * * *", H "S M * * * *", D "S M H * * *",
-- W "S M H * * DOW", M "S M H DOM * *" (hours 4-22, DOM <= 28, so no DST gap).
CREATE FUNCTION tock_seed.next_after(kind text, s int, m int, h int, dw int, dm int, tz text, after timestamptz)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE l timestamp := after AT TIME ZONE tz; base timestamp; step interval; t timestamptz;
BEGIN
	CASE kind
	WHEN 'F' THEN base := date_trunc('hour', l) + make_interval(mins => (extract(minute FROM l)::int / 5) * 5, secs => s); step := '5 minutes';
	WHEN 'H' THEN base := date_trunc('hour', l) + make_interval(mins => m, secs => s); step := '1 hour';
	WHEN 'D' THEN base := date_trunc('day', l) + make_interval(hours => h, mins => m, secs => s); step := '1 day';
	WHEN 'W' THEN base := date_trunc('day', l) + make_interval(days => (dw - extract(dow FROM l)::int + 7) % 7, hours => h, mins => m, secs => s); step := '7 days';
	WHEN 'M' THEN base := date_trunc('month', l) + make_interval(days => dm - 1, hours => h, mins => m, secs => s); step := '1 month';
	ELSE RETURN NULL;
	END CASE;
	FOR k IN 0..3 LOOP
		t := (base + k * step) AT TIME ZONE tz;
		IF t > after THEN RETURN t; END IF;
	END LOOP;
	RETURN NULL;
END $$;
SQL
}

seed_jobs_table() {
	"${PSQL[@]}" -d "$URL" -v jobs="$JOBS" -v fd="$FD" -v fw="$FW" -v now="$NOW" -v from="$FROM" -v buckets="$BUCKETS" <<'SQL'
SET TIME ZONE 'UTC';
SET work_mem = '512MB';
SET jit = off;
CREATE UNLOGGED TABLE tock_seed.j AS
WITH a AS (
	SELECT i,
		CASE WHEN i % 10000 = 0 THEN 'F' WHEN i % 1000 = 500 THEN 'H' WHEN i % 50 = 3 THEN 'O'
			WHEN tock_seed.u(i, 1) < :fd THEN 'D' WHEN tock_seed.u(i, 1) < :fd + :fw THEN 'W' ELSE 'M' END AS kind,
		CASE WHEN tock_seed.u(i, 2) < 0.01 THEN 'audit' WHEN tock_seed.u(i, 2) < 0.011 THEN 'sandbox'
			ELSE (ARRAY['default', 'default', 'default', 'default', 'billing', 'billing', 'reports', 'reports', 'etl', 'etl'])[1 + floor(tock_seed.u(i, 2) * 10)::int] END AS namespace,
		CASE WHEN tock_seed.u(i, 3) < 0.65 THEN 'custom' WHEN tock_seed.u(i, 3) < 0.9 THEN 'http' ELSE 'nats' END AS hk,
		CASE WHEN tock_seed.u(i, 4) < 0.7 THEN 0 ELSE floor(tock_seed.u(i, 5) * 60)::int END AS sec,
		floor(tock_seed.u(i, 6) * 60)::int AS min,
		4 + floor(tock_seed.u(i, 7) * 19)::int AS hour,
		floor(tock_seed.u(i, 8) * 7)::int AS dw,
		1 + floor(tock_seed.u(i, 9) * 28)::int AS dm,
		tock_seed.u(i, 10) AS u_state,
		CASE WHEN tock_seed.u(i, 11) < 0.9 THEN tock_seed.u(i, 12) * 2 ELSE tock_seed.u(i, 12) * 29 END AS created_day,
		date_trunc('second', :'now'::timestamptz - interval '1 minute' - tock_seed.u(i, 13) * interval '6 days') AS once_at,
		tock_seed.u(i, 14) AS u_pause,
		(ARRAY[0, 0, 0, 30000, 60000, 300000])[1 + floor(tock_seed.u(i, 15) * 6)::int]::bigint AS timeout_ms,
		CASE WHEN tock_seed.u(i, 16) < 0.05 THEN 'high' WHEN tock_seed.u(i, 16) < 0.15 THEN 'low' ELSE 'normal' END AS priority,
		CASE WHEN tock_seed.u(i, 17) < 0.15 THEN 5 ELSE 3 END AS max_attempts,
		tock_seed.u(i, 18) AS u_name, tock_seed.u(i, 19) AS u_tz, tock_seed.u(i, 20) AS u_team,
		tock_seed.u(i, 21) AS u_labels, tock_seed.u(i, 22) AS u_desc, tock_seed.u(i, 23) AS u_payload
	FROM generate_series(0, :jobs - 1) i
), b AS (
	SELECT a.*,
		'job-' || lpad(i::text, greatest(6, length((:jobs - 1)::text)), '0') AS name,
		CASE kind WHEN 'F' THEN 'UTC' WHEN 'O' THEN 'UTC'
			WHEN 'H' THEN (ARRAY['UTC', 'UTC', 'Asia/Tokyo', 'Asia/Kolkata'])[1 + floor(u_tz * 4)::int]
			ELSE (ARRAY['UTC', 'UTC', 'UTC', 'Europe/Berlin', 'Europe/London', 'America/New_York', 'America/Los_Angeles',
				'America/Sao_Paulo', 'Asia/Tokyo', 'Asia/Kolkata', 'Australia/Sydney'])[1 + floor(u_tz * 11)::int] END AS tz,
		CASE kind WHEN 'O' THEN 'completed' ELSE CASE WHEN u_state < 0.08 THEN 'paused' ELSE 'active' END END AS state,
		CASE WHEN kind = 'O' THEN date_trunc('milliseconds', once_at - interval '1 minute' - u_pause * interval '2 days')
			ELSE date_trunc('milliseconds', :'from'::timestamptz + created_day * interval '1 day') END AS created_at,
		CASE hk WHEN 'custom' THEN CASE namespace
				WHEN 'billing' THEN (ARRAY['invoice-run', 'charge-retry', 'dunning-mail'])[1 + floor(u_name * 3)::int]
				WHEN 'reports' THEN (ARRAY['report-render', 'report-mail'])[1 + floor(u_name * 2)::int]
				WHEN 'etl' THEN (ARRAY['etl-extract', 'etl-load', 'etl-compact'])[1 + floor(u_name * 3)::int]
				ELSE (ARRAY['send-email', 'cleanup', 'cache-warm', 'sync-crm'])[1 + floor(u_name * 4)::int] END
			ELSE hk END AS hqueue,
		CASE namespace
			WHEN 'billing' THEN CASE WHEN u_team < 0.6 THEN 'payments' ELSE 'finance' END
			WHEN 'reports' THEN (ARRAY['analytics', 'finance', 'growth'])[1 + floor(u_team * 3)::int]
			WHEN 'etl' THEN (ARRAY['data', 'data', 'platform'])[1 + floor(u_team * 3)::int]
			ELSE (ARRAY['platform', 'growth', 'search', 'ops', 'payments'])[1 + floor(u_team * 5)::int] END AS team
	FROM a
), c AS (
	SELECT b.*,
		CASE hk
			WHEN 'custom' THEN '{"type":"custom","name":"' || hqueue || '"}'
			WHEN 'http' THEN '{"type":"http","url":"https://' || namespace || '-api.internal.invalid/hooks/' || (i % 40) || '","method":"POST"}'
			ELSE '{"type":"nats","subject":"' || namespace || '.jobs.' || (i % 20) || '"}' END AS handler_txt,
		CASE namespace
			WHEN 'billing' THEN '{"account_id":"acct-' || lpad(i::text, 7, '0') || '"}'
			WHEN 'reports' THEN '{"report":"' || (ARRAY['revenue', 'churn', 'usage', 'sla', 'inventory'])[1 + floor(u_payload * 5)::int] || '","format":"pdf"}'
			WHEN 'etl' THEN '{"table":"' || (ARRAY['orders', 'customers', 'events', 'payments', 'sessions', 'products'])[1 + floor(u_payload * 6)::int] || '"}'
			ELSE CASE WHEN u_payload < 0.5 THEN NULL ELSE '{"batch":' || (i % 10) || '}' END END AS payload_txt,
		'{"max_attempts":' || max_attempts || ',"initial_backoff":"1s","max_backoff":"5m0s","multiplier":2,"jitter":"full"}' AS retry_txt,
		CASE kind
			WHEN 'F' THEN sec || ' */5 * * * *'
			WHEN 'H' THEN sec || ' ' || min || ' * * * *'
			WHEN 'D' THEN sec || ' ' || min || ' ' || hour || ' * * *'
			WHEN 'W' THEN sec || ' ' || min || ' ' || hour || ' * * ' || dw
			WHEN 'M' THEN sec || ' ' || min || ' ' || hour || ' ' || dm || ' * *' END AS cron,
		CASE WHEN state = 'paused' THEN date_trunc('milliseconds', created_at + u_pause * (:'now'::timestamptz - created_at)) END AS paused_at
	FROM b
)
SELECT c.i, tock_seed.uuid7(c.created_at, 'tock-seed-job-' || c.i) AS id, NULL::int AS bucket,
	c.namespace, c.name, c.kind, c.sec, c.min, c.hour, c.dw, c.dm, c.tz, c.state, c.created_at, c.paused_at,
	CASE WHEN c.kind = 'O' THEN c.once_at END AS once_at,
	CASE c.state WHEN 'active' THEN :'now'::timestamptz WHEN 'paused' THEN c.paused_at ELSE c.once_at + interval '1 ms' END AS end_at,
	CASE WHEN c.state = 'active' THEN tock_seed.next_after(c.kind, c.sec, c.min, c.hour, c.dw, c.dm, c.tz, :'now'::timestamptz) END AS next_run_at,
	CASE WHEN c.state = 'paused' THEN tock_seed.next_after(c.kind, c.sec, c.min, c.hour, c.dw, c.dm, c.tz, c.paused_at) END AS paused_next_run_at,
	CASE WHEN c.kind = 'O' THEN jsonb_build_object('at', to_char(c.once_at, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
		ELSE jsonb_build_object('cron', c.cron) || CASE WHEN c.tz <> 'UTC' THEN jsonb_build_object('timezone', c.tz) ELSE '{}' END END AS schedule,
	c.hk, c.hqueue, c.handler_txt, c.payload_txt, c.retry_txt, c.timeout_ms, c.priority, c.max_attempts,
	tock_seed.spec_id(c.handler_txt, c.payload_txt, c.retry_txt, c.timeout_ms) AS spec_id,
	CASE WHEN c.u_labels < 0.1 AND c.i % 100 <> 37 THEN NULL
		ELSE jsonb_build_object('team', c.team, 'env', CASE WHEN c.u_labels < 0.85 THEN 'prod' ELSE 'staging' END)
			|| CASE WHEN c.u_labels > 0.7 THEN jsonb_build_object('tier', CASE WHEN c.u_desc < 0.5 THEN 'batch' ELSE 'critical' END) ELSE '{}' END
			|| CASE WHEN c.i % 100 = 37 THEN '{"tock.io/alert": "true"}'::jsonb ELSE '{}' END END AS labels,
	CASE WHEN c.u_desc < 0.3 THEN initcap(CASE c.kind WHEN 'F' THEN 'frequent' WHEN 'H' THEN 'hourly' WHEN 'D' THEN 'daily'
		WHEN 'W' THEN 'weekly' WHEN 'M' THEN 'monthly' ELSE 'one-off' END) || ' ' || c.hqueue || ' for ' || c.namespace END AS description,
	CASE WHEN c.kind = 'F' THEN 'skip' ELSE 'allow' END AS overlap
FROM c;
UPDATE tock_seed.j SET bucket = tock_seed.bucket_of(id, :buckets);
-- The narrow copy the history is generated from, one scan per day.
CREATE UNLOGGED TABLE tock_seed.src AS
SELECT i, id, bucket, namespace, name, kind, sec, min, hour, dw, dm, tz, created_at, end_at, once_at,
	hk, hqueue, spec_id, priority, max_attempts, timeout_ms
FROM tock_seed.j;
ANALYZE tock_seed.j;
ANALYZE tock_seed.src;
SELECT kind, state, count(*) FROM tock_seed.j GROUP BY 1, 2 ORDER BY 1, 2;
SQL
}

# One day of history: the scheduled times of every job on local day :day
# (in the job's zone), from its creation to now (or its pause), as
# executions (and attempts rows for those with two or more attempts), or as
# overlap skips for 2 % of the every-5-minutes jobs' runs.
cat >"$WORK/day.sql" <<'SQL'
SET TIME ZONE 'UTC';
SET work_mem = '256MB';
SET jit = off;
SET synchronous_commit = off;
WITH occ AS MATERIALIZED (
	SELECT s.*, t.sched,
		tock_seed.u3(s.i, extract(epoch FROM t.sched)::bigint, 1) AS r,
		tock_seed.u3(s.i, extract(epoch FROM t.sched)::bigint, 2) AS r2,
		tock_seed.u3(s.i, extract(epoch FROM t.sched)::bigint, 3) AS r3,
		tock_seed.u3(s.i, extract(epoch FROM t.sched)::bigint, 4) AS r4,
		tock_seed.u3(s.i, extract(epoch FROM t.sched)::bigint, 5) AS r5
	FROM tock_seed.src s
	CROSS JOIN LATERAL (
		SELECT ((:'day'::date + CASE s.kind
			WHEN 'F' THEN make_interval(secs => s.sec) + n * interval '5 minutes'
			WHEN 'H' THEN make_interval(mins => s.min, secs => s.sec) + n * interval '1 hour'
			WHEN 'O' THEN (s.once_at AT TIME ZONE 'UTC') - :'day'::date::timestamp
			ELSE make_interval(hours => s.hour, mins => s.min, secs => s.sec) END) AT TIME ZONE s.tz) AS sched
		FROM generate_series(0, CASE s.kind WHEN 'F' THEN 287 WHEN 'H' THEN 23 ELSE 0 END) n
	) t
	WHERE (s.kind IN ('F', 'H', 'D')
			OR (s.kind = 'W' AND s.dw = extract(dow FROM :'day'::date))
			OR (s.kind = 'M' AND s.dm = extract(day FROM :'day'::date))
			OR (s.kind = 'O' AND (s.once_at AT TIME ZONE 'UTC')::date = :'day'::date))
		AND s.created_at < :'day'::date + interval '2 days' AND s.end_at > :'day'::date - interval '2 days'
		AND t.sched >= s.created_at AND t.sched < s.end_at
), x AS MATERIALIZED (
	SELECT o.*,
		CASE WHEN o.kind = 'F' AND o.r2 < 0.02 THEN 'skip'
			WHEN o.r < 0.008 AND o.sched >= :'now'::timestamptz - interval '2 hours' AND o.r < 0.004 THEN 'failed'
			WHEN o.r < 0.008 THEN 'dead'
			WHEN o.r < 0.011 THEN 'cancelled'
			WHEN o.r < 0.026 THEN 'retried'
			ELSE 'succeeded' END AS st,
		-- start lag: mostly a few ms, 1 % over a second
		make_interval(secs => CASE WHEN o.r3 < 0.01 THEN 1 + o.r4 * 9 ELSE (2 + floor(o.r4 ^ 3 * 300)) / 1000.0 END) AS lag,
		-- attempt duration, by handler
		make_interval(secs => CASE o.hk
			WHEN 'custom' THEN floor(exp(ln(40) + o.r5 * ln(750))) / 1000.0
			WHEN 'http' THEN floor(exp(ln(15) + o.r5 * ln(200))) / 1000.0
			ELSE (1 + floor(o.r5 ^ 2 * 150)) / 1000.0 END) AS dur,
		(ARRAY['HTTP 503 Service Unavailable: upstream connect error or disconnect/reset before headers',
			'context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
			'dial tcp 10.42.7.19:5432: connect: connection refused',
			'invalid payload: missing field "account_id"',
			'HTTP 500 Internal Server Error: {"error":"internal"}',
			'rate limited: HTTP 429 Too Many Requests (retry after 30s)',
			'exit status 1: report generation failed: disk quota exceeded',
			'nats: no responders available for request'])[1 + floor(o.r2 * 8)::int] AS err,
		CASE WHEN o.hk = 'custom' THEN o.hqueue || '-worker-' || floor(o.r3 * 4)::int ELSE 'tockd-' || floor(o.r3 * 3)::int END AS executor
	FROM occ o
), y AS (
	SELECT x.*,
		CASE st WHEN 'retried' THEN 2 WHEN 'dead' THEN max_attempts WHEN 'failed' THEN 1 WHEN 'cancelled' THEN 0 ELSE 1 END AS na,
		sched + lag AS started
	FROM x WHERE st <> 'skip'
), ins AS (
	INSERT INTO executions (id, job_id, bucket, namespace, job_name, scheduled_for, manual, state, attempts,
		dispatched_at, started_at, finished_at, executor_id, error, output, created_at, fired_by, priority,
		next_attempt_at, series_base, dispatches,
		attempt_executor, attempt_started_at, attempt_finished_at, attempt_outcome, spec_id)
	SELECT tock_seed.exec_id(y.id, y.sched), y.id, y.bucket, y.namespace, y.name, y.sched, false,
		CASE st WHEN 'retried' THEN 'succeeded' ELSE st END, na,
		-- dispatched: the first publish at its millisecond; a retried or dead
		-- one's last dispatch just before its last attempt
		CASE WHEN st = 'failed' THEN NULL
			WHEN na >= 2 THEN started + (na - 1) * dur + make_interval(secs => 2 ^ (na - 1) - 1) - interval '3 ms'
			ELSE sched + make_interval(secs => floor(r4 * 3) / 1000.0) END,
		CASE WHEN st = 'cancelled' THEN NULL ELSE started END,
		CASE st WHEN 'failed' THEN NULL
			WHEN 'cancelled' THEN sched + lag + r5 * interval '60 seconds'
			ELSE started + na * dur + make_interval(secs => 2 ^ (na - 1) - 1) END,
		CASE WHEN st = 'cancelled' THEN '' ELSE executor END,
		CASE st WHEN 'dead' THEN err WHEN 'failed' THEN err WHEN 'cancelled' THEN 'cancelled' ELSE '' END,
		CASE WHEN st IN ('succeeded', 'retried') AND hk = 'custom' AND r4 < 0.5 THEN 'ok: ' || floor(r5 * 2000) || ' items' ELSE '' END,
		sched - make_interval(secs => (100 + floor(r3 * 800)) / 1000.0),
		'tockd-' || (bucket % 3), priority,
		CASE WHEN st = 'failed' THEN started + dur + make_interval(secs => 1 + r4) END,
		0,
		CASE WHEN st IN ('failed', 'dead', 'retried') THEN na - (CASE WHEN st = 'failed' THEN 0 ELSE 1 END) ELSE 0 END,
		CASE WHEN na = 1 THEN executor END,
		CASE WHEN na = 1 THEN started END,
		CASE WHEN na = 1 THEN started + dur END,
		CASE WHEN na = 1 THEN CASE st WHEN 'failed' THEN 'failed' ELSE 'succeeded' END END,
		y.spec_id
	FROM y
	ORDER BY y.sched
	ON CONFLICT DO NOTHING
	RETURNING id, scheduled_for, state, attempts, started_at, finished_at, error, executor_id
), att AS (
	INSERT INTO attempts (execution_id, scheduled_for, number, executor_id, started_at, finished_at, outcome, error, output)
	SELECT ins.id, ins.scheduled_for, k, ins.executor_id,
		ins.started_at + (k - 1) * d.d + make_interval(secs => 2 ^ (k - 1) - 1),
		ins.started_at + k * d.d + make_interval(secs => 2 ^ (k - 1) - 1),
		CASE WHEN k = ins.attempts AND ins.state = 'succeeded' THEN 'succeeded' ELSE 'failed' END,
		CASE WHEN k = ins.attempts AND ins.state = 'succeeded' THEN ''
			WHEN ins.state = 'dead' THEN ins.error
			ELSE 'HTTP 503 Service Unavailable: upstream connect error or disconnect/reset before headers' END,
		''
	FROM ins
	CROSS JOIN LATERAL (SELECT (ins.finished_at - ins.started_at - make_interval(secs => 2 ^ (ins.attempts - 1) - 1)) / ins.attempts AS d) d
	CROSS JOIN LATERAL generate_series(1, ins.attempts) k
	WHERE ins.attempts >= 2
	RETURNING 1
), sk AS (
	INSERT INTO skipped_runs (job_id, first_at, last_at, runs, reason, namespace, job_name, recorded_at)
	SELECT id, sched, sched, 1, 'overlap', namespace, name, sched + interval '4 ms' FROM x WHERE st = 'skip'
	RETURNING 1
)
SELECT format('   day %s: %s executions, %s attempts rows, %s skips', :'day', (SELECT count(*) FROM ins),
	(SELECT count(*) FROM att), (SELECT count(*) FROM sk));
SQL

history() {
	local days
	days=$("${PSQL[@]}" -d "$URL" -At -c "SELECT d::date FROM generate_series('$FROM'::timestamptz::date - 1, '$NOW'::timestamptz::date + 1, interval '1 day') d")
	printf '%s\n' $days | xargs -P "$PAR" -I{} "${PSQL[@]}" -d "$URL" -At -v day={} -v now="$NOW" -f "$WORK/day.sql"
}

# Exactly 12 dead executions on 12 different days get the needle error (and
# their attempts too), for error-text search.
needle() {
	"${PSQL[@]}" -d "$URL" <<'SQL'
SET TIME ZONE 'UTC';
CREATE TEMP TABLE needles AS
SELECT id, scheduled_for FROM (
	SELECT DISTINCT ON (scheduled_for::date) id, scheduled_for FROM executions
	WHERE state = 'dead' ORDER BY scheduled_for::date, id) d
ORDER BY scheduled_for LIMIT 12;
UPDATE executions x SET error = 'needle: connection refused by payments-api'
FROM needles n WHERE x.id = n.id AND x.scheduled_for = n.scheduled_for;
UPDATE attempts a SET error = 'needle: connection refused by payments-api'
FROM needles n WHERE a.execution_id = n.id AND a.scheduled_for = n.scheduled_for;
SELECT format('   %s executions carry the needle', count(*)) FROM executions WHERE error LIKE 'needle:%';
SQL
}

# The jobs, their names, specs and last successes, from the history just
# written (runs, last run, last success).
jobs_rows() {
	"${PSQL[@]}" -d "$URL" -v now="$NOW" <<'SQL'
SET TIME ZONE 'UTC';
SET work_mem = '1GB';
SET jit = off;
SET synchronous_commit = off;
CREATE UNLOGGED TABLE tock_seed.agg AS
SELECT job_id, count(*) AS runs, max(scheduled_for) AS last_run,
	max(finished_at) FILTER (WHERE state = 'succeeded') AS last_ok,
	max(id::text) FILTER (WHERE state = 'succeeded') AS last_ok_id
FROM executions GROUP BY job_id;
CREATE INDEX ON tock_seed.agg (job_id);
ANALYZE tock_seed.agg;

INSERT INTO job_specs (id, handler, payload, retry, timeout_ms, created_at)
SELECT DISTINCT ON (spec_id) spec_id, handler_txt::jsonb, payload_txt::jsonb, retry_txt::jsonb, timeout_ms, created_at
FROM tock_seed.j ORDER BY spec_id, created_at;

INSERT INTO jobs (id, bucket, namespace, name, schedule, handler, payload, state, next_run_at, last_run_at, retry,
	timeout_ms, created_at, updated_at, version, priority, spec_id, labels, description, policy, runs,
	paused_next_run_at, skip_before)
SELECT j.id, j.bucket, j.namespace, j.name, j.schedule, j.handler_txt::jsonb, j.payload_txt::jsonb, j.state,
	j.next_run_at, a.last_run, j.retry_txt::jsonb, j.timeout_ms, j.created_at,
	CASE WHEN j.state = 'paused' THEN j.paused_at
		ELSE greatest(j.created_at, coalesce(a.last_run - interval '500 ms', j.created_at)) END,
	coalesce(a.runs, 0) + CASE WHEN j.state = 'paused' THEN 1 ELSE 0 END,
	j.priority, j.spec_id, j.labels, j.description,
	jsonb_build_object('missed', jsonb_build_object('max', 100, 'grace', '1m0s', 'policy', 'latest'), 'overlap', j.overlap),
	coalesce(a.runs, 0), j.paused_next_run_at, NULL
FROM tock_seed.j j LEFT JOIN tock_seed.agg a ON a.job_id = j.id
ORDER BY j.bucket, j.id;

-- The search columns (migration 37) copy the jobs rows just written.
INSERT INTO job_names (namespace, name, job_id, bucket, state, handler, labels)
SELECT namespace, name, id, bucket, state,
	CASE WHEN handler->>'type' = 'custom' THEN handler->>'name' ELSE handler->>'type' END, labels
FROM jobs ORDER BY namespace COLLATE "C", name COLLATE "C";

INSERT INTO job_successes (job_id, last_success_at, execution_id)
SELECT j.id, a.last_ok, a.last_ok_id::uuid FROM tock_seed.j j LEFT JOIN tock_seed.agg a ON a.job_id = j.id
ORDER BY j.id;

-- The cluster was created (and success tracking began) before the history.
UPDATE cluster SET created_at = (SELECT min(created_at) FROM tock_seed.j) - interval '1 hour',
	successes_since = (SELECT min(created_at) FROM tock_seed.j) - interval '1 hour';
SQL
}

# API keys (their secrets are unknown: for listing only) and the audit trail
# the API would have written: one jobs.create per job (jobs:batch writes one
# per job), one jobs.pause per paused job.
audit_rows() {
	"${PSQL[@]}" -d "$URL" <<'SQL'
SET TIME ZONE 'UTC';
SET synchronous_commit = off;
INSERT INTO api_keys (id, secret_hash, namespace, role, name, created_by, created_at, last_used_at)
SELECT k.id, sha256(convert_to(k.id, 'UTF8')), k.ns, k.role, k.name, 'key:AdminBootKey', min_created - interval '2 hours', NULL
FROM (VALUES ('AdminBootKey', '*', 'admin', 'bootstrap admin'),
	('DeployCI0001', '*', 'editor', 'ci deployer'),
	('BillingOps01', 'billing', 'operator', 'billing on-call'),
	('ReportsBot01', 'reports', 'editor', 'reports service'),
	('EtlPipeline1', 'etl', 'editor', 'etl orchestrator'),
	('DashboardRO1', '*', 'reader', 'dashboard')) k(id, ns, role, name),
	(SELECT min(created_at) AS min_created FROM tock_seed.j) m;

INSERT INTO audit_log (at, id, actor, namespace, action, resource, before, after)
SELECT created_at, tock_seed.uuid7(created_at, 'tock-seed-audit-' || i),
	CASE namespace WHEN 'billing' THEN 'key:BillingOps01' WHEN 'reports' THEN 'key:ReportsBot01'
		WHEN 'etl' THEN 'key:EtlPipeline1' ELSE 'key:DeployCI0001' END,
	namespace, 'jobs.create', 'job ' || id, NULL,
	jsonb_strip_nulls(jsonb_build_object('id', id, 'namespace', namespace, 'name', name, 'schedule', schedule,
		'handler', handler_txt::jsonb, 'payload', payload_txt::jsonb, 'state', 'active', 'labels', labels,
		'description', description, 'priority', priority, 'retry', retry_txt::jsonb, 'bucket', bucket,
		'created_at', to_char(created_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
FROM tock_seed.j
UNION ALL
SELECT paused_at, tock_seed.uuid7(paused_at, 'tock-seed-pause-' || i), 'key:DeployCI0001', namespace, 'jobs.pause', 'job ' || id,
	jsonb_build_object('id', id, 'namespace', namespace, 'name', name, 'state', 'active'),
	jsonb_build_object('id', id, 'namespace', namespace, 'name', name, 'state', 'paused')
FROM tock_seed.j WHERE state = 'paused'
ORDER BY 1;
SQL
}

vacuum_analyze() {
	"${PSQL[@]}" -d "$URL" -c "DROP SCHEMA tock_seed CASCADE" -c "ALTER DATABASE $DB RESET search_path"
	"${PSQL[@]}" -d "$URL" -c "VACUUM (ANALYZE)"
}

verify() {
	"$WORK/seedhelper" verify "$URL" "$NOW" 1000
}

counts() {
	"${PSQL[@]}" -d "$URL" -P footer=off <<'SQL'
SELECT 'jobs' AS "table", count(*) AS rows FROM jobs
UNION ALL SELECT 'job_names', count(*) FROM job_names
UNION ALL SELECT 'job_specs', count(*) FROM job_specs
UNION ALL SELECT 'job_successes (with a success)', count(last_success_at) FROM job_successes
UNION ALL SELECT 'executions', count(*) FROM executions
UNION ALL SELECT 'executions_default (must be 0)', count(*) FROM executions_default
UNION ALL SELECT 'attempts', count(*) FROM attempts
UNION ALL SELECT 'skipped_runs', count(*) FROM skipped_runs
UNION ALL SELECT 'audit_log', count(*) FROM audit_log
UNION ALL SELECT 'api_keys', count(*) FROM api_keys;
SELECT state, count(*) FROM jobs GROUP BY 1 ORDER BY 1;
SELECT namespace, count(*) FROM job_names GROUP BY 1 ORDER BY 1;
SELECT state, count(*), round(100.0 * count(*) / sum(count(*)) OVER (), 2) AS pct FROM executions GROUP BY 1 ORDER BY 1;
SELECT count(*) FILTER (WHERE labels @> '{"tock.io/alert": "true"}') AS alert_jobs,
	count(*) FILTER (WHERE labels @> '{"team": "payments"}') AS team_payments,
	min(next_run_at) AS first_due, count(*) FILTER (WHERE next_run_at < now() + interval '1 hour') AS due_within_1h
FROM jobs;
SELECT pg_size_pretty(pg_database_size(current_database())) AS database_size;
SQL
}

step "build the Go helper" build_helper
step "create database" create_db
step "read the clock" seed_clock
step "migrate + partitions (store.Migrate/Init/...)" prepare
step "seed functions" seed_functions
step "compute $JOBS jobs" seed_jobs_table
step "history: executions, attempts, skips" history
step "needle errors" needle
step "jobs, names, specs, successes" jobs_rows
step "api keys + audit trail" audit_rows
step "drop seed helpers; VACUUM (ANALYZE)" vacuum_analyze
step "verify a sample against Go" verify
step "row counts" counts

echo
echo "seed-scale: $DB seeded in $(awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')s"
printf '  %s\n' "${SUMMARY[@]}"
