#!/usr/bin/env bash
# Lints api/openapi.yaml with Spectral (pinned in tools/spectral, rules in
# api/.spectral.yaml); fails on any warning. Installs Spectral with npm
# from its lock file on first use, and Node.js and npm from Debian's
# packages if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
	echo "lint-openapi: npm not found; installing Debian's nodejs and npm" >&2
	sudo_cmd=""
	[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
	$sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq nodejs npm >/dev/null
fi
spectral=tools/spectral/node_modules/.bin/spectral
if [ ! -x "$spectral" ]; then
	(cd tools/spectral && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
fi
"$spectral" lint --ruleset api/.spectral.yaml --fail-severity=warn api/openapi.yaml
