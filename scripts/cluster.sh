#!/usr/bin/env bash
# Runs a tock cluster of several nodes on one machine: `tockd dev` (every
# role, embedded etcd and NATS, writes $DIR/env) and N-1 `tockd serve`
# nodes that share its Postgres, etcd and NATS, read from that env file.
# Used by `make bench-cluster`; docs/bench.md ("Several nodes on one
# machine") has the why.
#
#   scripts/cluster.sh start [N]   start N nodes (default 3) in the background
#   scripts/cluster.sh status      the nodes, their pids and who owns how many buckets
#   scripts/cluster.sh stop        stop them all: extra nodes first, then tockd dev
#   scripts/cluster.sh run [N]     start, and stop them all on Ctrl-C or SIGTERM
#
# Environment:
#   TOCKD              tockd binary (default bin/tockd, built by `make build`)
#   TOCK_DEV_DIR       tockd dev's data dir; also holds the nodes' logs
#                      (node-<i>.log) and pids (cluster.pids) (default .dev)
#   TOCK_POSTGRES_URL  the database, passed to tockd dev (its default if unset)
#   CLUSTER_ROLES      roles of the extra nodes (default api,scheduler,recorder:
#                      tockbench brings its own executors)
#   TOCKD_FLAGS        more flags for every node, e.g. "--log-level warn --pprof"
#   HTTP_PORT          first HTTP port tried (default 8080); nodes take the
#                      next free ones. etcd and NATS take tockd dev's own
#                      choice (its preferred port, or a free one if taken).
set -euo pipefail

TOCKD=${TOCKD:-bin/tockd}
DIR=${TOCK_DEV_DIR:-.dev}
ROLES=${CLUSTER_ROLES:-api,scheduler,recorder}
HTTP_PORT=${HTTP_PORT:-8080}
PIDS="$DIR/cluster.pids"
# shellcheck disable=SC2206 # word splitting of the extra flags is wanted
EXTRA=(${TOCKD_FLAGS:-})

say() { echo "cluster: $*" >&2; }
die() { say "$*"; exit 1; }

port_taken() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }
# free_port prints the first port from $1 on that nothing listens on.
free_port() {
  local p=$1
  while port_taken "$p"; do p=$((p + 1)); done
  echo "$p"
}

# alive: the pid runs and is a tockd (pids are reused).
alive() { [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q tockd; }

# wait_ready waits until the node with pid $1 answers /readyz on $2, or
# fails with the tail of its log $3.
wait_ready() {
  local pid=$1 addr=$2 log=$3
  for _ in $(seq 1 120); do
    if ! alive "$pid"; then
      tail -n 20 "$log" >&2 || true
      die "node $pid exited (log: $log)"
    fi
    curl -fs -o /dev/null "http://$addr/readyz" && return 0
    sleep 0.5
  done
  tail -n 20 "$log" >&2 || true
  die "node $pid not ready on $addr after 60 s (log: $log)"
}

# owners prints "count node" per node owning buckets, if etcdctl is at hand.
owners() {
  local etcdctl=${ETCDCTL:-bin/etcdctl}
  [ -x "$etcdctl" ] || return 0
  # shellcheck disable=SC1091
  (source "$DIR/env" && "$etcdctl" get --prefix /tock/dev/owners/ --print-value-only 2>/dev/null |
    grep -v '^$' | sort | uniq -c) || true
}

# balanced: $1 nodes own buckets, each at least 90 % of a fair share.
balanced() {
  owners | awk -v n="$1" '{ c[NR] = $1; sum += $1 }
    END { if (NR != n) exit 1; for (i in c) if (c[i] * 10 < sum / n * 9) exit 1 }'
}

start() {
  local n=${1:-3}
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "want a number of nodes, got '$n'"
  [ -x "$TOCKD" ] || die "no $TOCKD: run make build (or set TOCKD)"
  if [ -s "$PIDS" ]; then
    while read -r pid _; do
      alive "$pid" && die "a cluster runs already (pid $pid in $PIDS): scripts/cluster.sh stop"
    done <"$PIDS"
  fi
  mkdir -p "$DIR"
  : >"$PIDS"
  # A node that fails to start takes the ones already started down with it.
  trap stop EXIT
  rm -f "$DIR/env" # written afresh by tockd dev once etcd and NATS run

  # Each node runs in a session of its own (setsid), so that Ctrl-C in
  # the terminal reaches this script only, which stops the nodes in order.
  local port log pid
  port=$(free_port "$HTTP_PORT")
  log="$DIR/node-1.log"
  setsid "$TOCKD" dev --data-dir "$DIR" --http-addr "127.0.0.1:$port" "${EXTRA[@]}" >"$log" 2>&1 &
  pid=$!
  echo "$pid dev 127.0.0.1:$port" >>"$PIDS"
  say "node 1: tockd dev, pid $pid, http 127.0.0.1:$port, log $log"
  wait_ready "$pid" "127.0.0.1:$port" "$log"
  [ -s "$DIR/env" ] || die "tockd dev wrote no $DIR/env"

  # The extra nodes join tockd dev's cluster ("dev") through its env file.
  local etcd nats pg
  # shellcheck disable=SC1091
  read -r etcd nats pg < <(source "$DIR/env" && echo "$ETCDCTL_ENDPOINTS $TOCK_NATS_URL $TOCK_POSTGRES_URL")
  for i in $(seq 2 "$n"); do
    port=$(free_port $((port + 1)))
    log="$DIR/node-$i.log"
    # --auth none: the extra nodes join tockd dev's cluster, whose API is
    # open on loopback too.
    setsid "$TOCKD" serve --node-id "node-$i" --cluster dev --roles "$ROLES" --auth none \
      --http-addr "127.0.0.1:$port" --etcd-endpoints "$etcd" --nats-url "$nats" --postgres-url "$pg" \
      "${EXTRA[@]}" >"$log" 2>&1 &
    pid=$!
    echo "$pid node-$i 127.0.0.1:$port" >>"$PIDS"
    say "node $i: tockd serve --roles $ROLES, pid $pid, http 127.0.0.1:$port, log $log"
    wait_ready "$pid" "127.0.0.1:$port" "$log"
  done

  # Sticky rebalancing moves a joining node's share over some seconds;
  # a bench started before it ends would measure the move.
  if [ "$n" -gt 1 ] && [ -x "${ETCDCTL:-bin/etcdctl}" ]; then
    say "waiting for the buckets to spread over the nodes"
    for _ in $(seq 1 120); do
      balanced "$n" && break
      sleep 0.5
    done
  fi
  say "$n nodes up; buckets per node:"
  owners >&2
  say "source $DIR/env to point tockbench, tockctl and etcdctl at the cluster; scripts/cluster.sh stop to stop it"
  trap - EXIT
}

status() {
  [ -s "$PIDS" ] || { say "no cluster ($PIDS is empty)"; return 0; }
  while read -r pid name addr; do
    if alive "$pid"; then say "$name pid $pid http $addr: running"; else say "$name pid $pid http $addr: stopped"; fi
  done <"$PIDS"
  owners >&2
}

# stop sends SIGTERM to the extra nodes, then to tockd dev (it hosts etcd
# and NATS, which the others need to hand their buckets over), each
# waited for up to 30 s and then killed.
stop() {
  [ -s "$PIDS" ] || return 0
  local pids=()
  mapfile -t pids < <(tac "$PIDS" | awk '{print $1}')
  for pid in "${pids[@]}"; do
    alive "$pid" || continue
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do
      alive "$pid" || break
      sleep 0.5
    done
    if alive "$pid"; then
      say "pid $pid did not stop in 30 s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  : >"$PIDS"
  say "stopped"
}

case "${1:-}" in
start) start "${2:-3}" ;;
stop) stop ;;
status) status ;;
run)
  trap 'stop; exit 0' INT TERM
  start "${2:-3}"
  trap stop EXIT
  say "Ctrl-C stops every node"
  while :; do
    sleep 1 &
    wait $! || true
    while read -r pid name _; do
      alive "$pid" || { say "$name (pid $pid) exited; stopping the others"; exit 1; }
    done <"$PIDS"
  done
  ;;
*)
  sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
