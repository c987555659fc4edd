#!/usr/bin/env bash
# Makes sure what the dashboard's build and its browser tests need is here:
# Node.js and npm (Debian's, if missing), ui/node_modules from the lock file
# (esbuild, TypeScript, axe-core, ...), and, with --browser, Debian's
# Chromium. Running tock needs none of it: the built files are in tockd.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
apt_updated=""
apt_install() {
	if [ -z "$apt_updated" ]; then
		$sudo_cmd apt-get update -qq
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >/dev/null
}
if ! command -v npm >/dev/null 2>&1; then
	echo "ensure-ui: npm not found; installing Debian's nodejs and npm" >&2
	apt_install nodejs npm
fi
# Reinstall when the lock file changed since the last install.
if ! cmp -s ui/package-lock.json ui/node_modules/.tock-lock 2>/dev/null; then
	(cd ui && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
	cp ui/package-lock.json ui/node_modules/.tock-lock
fi
if [ "${1:-}" = "--browser" ] && ! command -v chromium >/dev/null 2>&1 && [ -z "${TOCK_CHROMIUM:-}" ]; then
	echo "ensure-ui: Chromium not found; installing Debian's chromium for the browser tests" >&2
	apt_install chromium
fi
