#!/usr/bin/env bash
# Makes sure a PostgreSQL server accepts connections on 127.0.0.1:5432 as
# user postgres without a password: installs it (Debian) and starts it if
# needed. Used by `make dev` and `make test`; safe to run again.
set -euo pipefail

PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}

ready() { pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null; }
can_login() { psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! command -v psql >/dev/null 2>&1; then
  echo "ensure-postgres: installing PostgreSQL (apt-get)" >&2
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq postgresql postgresql-client >/dev/null
fi

if ! ready; then
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
  if [ -z "$version" ]; then
    echo "ensure-postgres: no PostgreSQL cluster found under /etc/postgresql" >&2
    exit 1
  fi
  echo "ensure-postgres: starting PostgreSQL $version" >&2
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 60); do ready && break; sleep 0.5; done
fi
ready || { echo "ensure-postgres: PostgreSQL does not answer on $PGHOST:$PGPORT" >&2; exit 1; }

if ! can_login; then
  # A fresh Debian install asks for a password on TCP; this is a local
  # development or CI machine, so trust loopback connections.
  version=$(ls /etc/postgresql | sort -V | tail -1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  echo "ensure-postgres: trusting loopback connections in $hba" >&2
  as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  for _ in $(seq 1 20); do can_login && break; sleep 0.5; done
fi
can_login || { echo "ensure-postgres: cannot log in as postgres on $PGHOST:$PGPORT" >&2; exit 1; }
echo "ensure-postgres: PostgreSQL ready on $PGHOST:$PGPORT" >&2
