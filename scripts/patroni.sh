#!/usr/bin/env bash
# Runs a PostgreSQL primary and a synchronous standby managed by Patroni
# on this machine (loopback, free ports, temporary directories; never the
# system cluster on 5432), with an embedded etcd unless ETCD is set, until
# Ctrl-C. Prints the multi-host URL to give tockd as --postgres-url; the
# failover tests (internal/pgha) start the same topology. Installs Patroni
# if missing. docs/postgres.md ("High availability") has the why.
#
#   scripts/patroni.sh [flags]   e.g. -async, -members 3, -ttl 6, -v
#
# Environment:
#   ETCD      etcd endpoint for Patroni, e.g. tockd dev's (default: embedded)
#   URL_FILE  also write the URL there (default .dev/patroni.url)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-patroni.sh
mkdir -p .dev
exec go run ./internal/pgha/cmd/tock-patroni -url-file "${URL_FILE:-.dev/patroni.url}" ${ETCD:+-etcd "$ETCD"} "$@"
