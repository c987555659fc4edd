#!/usr/bin/env bash
# Makes sure promtool and prometheus (Debian's prometheus package) are
# installed: deploy/monitoring's tests check the alert and recording
# rules with promtool and evaluate the dashboard's queries on a real
# Prometheus. Only the binaries are wanted: the package's service is not
# started (it would take port 9090) and is left disabled. Safe to run
# again.
set -euo pipefail
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
	exit 0
fi
echo "ensure-prometheus: installing Debian's prometheus (apt-get) for promtool and the rules' tests" >&2
# invoke-rc.d and deb-systemd-invoke ask /usr/sbin/policy-rc.d whether a
# package may start its service; 101 says no. A machine that has one
# (container images do) keeps its own.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
	trap 'as_root rm -f "$policy"' EXIT
fi
as_root apt-get update -qq
DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# The package enables its service for the next boot; the tests run their
# own Prometheus on a free port, so leave it off (and stopped, should an
# init system have started it after all).
if [ -d /run/systemd/system ]; then
	as_root systemctl disable --now prometheus.service >/dev/null 2>&1 || true
elif command -v update-rc.d >/dev/null 2>&1; then
	as_root update-rc.d prometheus disable >/dev/null 2>&1 || true
	as_root invoke-rc.d --force prometheus stop >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null && command -v prometheus >/dev/null
