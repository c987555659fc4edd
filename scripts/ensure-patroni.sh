#!/usr/bin/env bash
# Makes sure Patroni (Debian's patroni package, with its etcd client) is
# installed: the Postgres failover tests (internal/pgha) and
# scripts/patroni.sh need it. Safe to run again.
set -euo pipefail
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if command -v patroni >/dev/null 2>&1 && /usr/bin/python3 -c 'import etcd' 2>/dev/null; then
  exit 0
fi
echo "ensure-patroni: installing Patroni (apt-get)" >&2
as_root apt-get update -qq
DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq patroni python3-etcd >/dev/null
