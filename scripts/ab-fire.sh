#!/usr/bin/env bash
# ab-fire.sh: firing's CPU per execution, two trees side by side.
#
#   scripts/ab-fire.sh BEFORE_REV [PAIRS] [TOCKBENCH_FLAGS...]
#
# Builds tockd and tockbench of BEFORE_REV (a git worktree in a temporary
# directory) and of this checkout's work tree, then runs PAIRS pairs
# (default 3), alternating "after" (this tree) and "before": for each run a
# fresh database, `tockd dev` on its own ports and data directory, then
# tockbench (default flags: --jobs 180000 --mix spread-minute --duration
# 60s, i.e. 3,000 executions a second) with -o json, then tockd is stopped
# and the database dropped. Prints one line per run (µs of CPU per
# execution in all and by component, fire and start lag p99, fired, twice,
# missed) and the after/before ratio of each pair. Each run's JSON and
# tockd log stay in the output directory (AB_OUT, default a temporary one).
#
# This is how docs/bench.md's "side by side" tables are made. Run it with
# nothing else loading the machine; the figures of one pair are only
# comparable with each other.
#
# Environment: PGBASE (default postgres://postgres@127.0.0.1:5432), AB_OUT.
# Needs go, git, psql, curl and python3.
set -euo pipefail

before=${1:?usage: scripts/ab-fire.sh BEFORE_REV [PAIRS] [TOCKBENCH_FLAGS...]}
pairs=${2:-3}
shift $(($# >= 2 ? 2 : 1))
flags=("$@")
if [ ${#flags[@]} -eq 0 ]; then
	flags=(--jobs 180000 --mix spread-minute --duration 60s)
fi
pgbase=${PGBASE:-postgres://postgres@127.0.0.1:5432}
root=$(git rev-parse --show-toplevel)
out=${AB_OUT:-$(mktemp -d /tmp/ab-fire.XXXXXX)}
mkdir -p "$out"
echo "ab-fire: before $before, after the work tree of $root, $pairs pairs, tockbench ${flags[*]}; output in $out" >&2

build() { # tree dir
	(cd "$1" && go build -o "$2/tockd" ./cmd/tockd && go build -o "$2/tockbench" ./cmd/tockbench)
}
wt=$(mktemp -d /tmp/ab-fire-src.XXXXXX)
git -C "$root" worktree add --detach "$wt" "$before" >/dev/null
trap 'git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || true' EXIT
mkdir -p "$out/before" "$out/after"
build "$wt" "$out/before"
build "$root" "$out/after"

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # tree run-number
	local tree=$1 n=$2 db="tock_ab_$1_$2" dir="$out/$1-$2"
	psql "$pgbase/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null
	rm -rf "$dir" && mkdir -p "$dir"
	local http etcd nats
	http=$(freeport) etcd=$(freeport) nats=$(freeport)
	"$out/$tree/tockd" dev --data-dir "$dir" --http-addr "127.0.0.1:$http" --etcd-port "$etcd" --nats-port "$nats" \
		--postgres-url "$pgbase/$db" >"$dir/tockd.log" 2>&1 &
	local pid=$!
	for _ in $(seq 120); do
		curl -fsS "http://127.0.0.1:$http/readyz" >/dev/null 2>&1 && [ -f "$dir/env" ] && break
		sleep 1
	done
	# shellcheck disable=SC1091
	(source "$dir/env" && "$out/$tree/tockbench" "${flags[@]}" -o json >"$dir/result.json" 2>"$dir/tockbench.log") || true
	kill "$pid" && wait "$pid" || true
	psql "$pgbase/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null
	python3 - "$tree" "$dir/result.json" <<'EOF'
import json, sys
tree, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"{tree:6}  failed: {e}")
    sys.exit(0)
w = r  # the report's counts and lags are its top-level fields
cpu = r.get("cpu") or {}
comp = {c["name"]: c["us_per_execution"] for c in cpu.get("components", [])}
def lag(k):
    v = (w.get(k) or {}).get("p99")
    return f"{v:.0f} ms" if v is not None else "-"
print(f"{tree:6}  total {cpu.get('total_us_per_execution', 0):6.1f} µs  " +
      "  ".join(f"{k} {v:.1f}" for k, v in comp.items()) +
      f"  fire lag p99 {lag('fire_lag_ms')}  start lag p99 {lag('start_lag_ms')}" +
      f"  fired {w.get('fired')} twice {w.get('multi_fired')} missed {w.get('zero_fired')}")
print(cpu.get("total_us_per_execution", 0), file=open(path + ".total", "w"))
EOF
}

for i in $(seq "$pairs"); do
	run after "$i"
	run before "$i"
	a=$(cat "$out/after-$i/result.json.total" 2>/dev/null || echo 0)
	b=$(cat "$out/before-$i/result.json.total" 2>/dev/null || echo 0)
	python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'pair {sys.argv[3]}: after/before {a/b:.2f}' if b else 'pair: no figure')" "$a" "$b" "$i"
done
