#!/usr/bin/env bash
# Lints api/openapi.yaml with two independent linters, each failing on any
# warning: Spectral (pinned in tools/spectral, rules in api/.spectral.yaml)
# and Redocly CLI (pinned in tools/redocly, its recommended rules).
# Installs them with npm from their lock files on first use, and Node.js
# and npm from Debian's packages if they are missing.
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
redocly=tools/redocly/node_modules/.bin/redocly
if [ ! -x "$redocly" ]; then
	(cd tools/redocly && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
fi
# Redocly fails only on errors by itself: its JSON report's totals decide,
# so that a warning fails too.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
report=$("$redocly" lint --extends=recommended --format=json api/openapi.yaml 2>/dev/null || true)
problems=$(printf '%s' "$report" | node -e '
let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
  try { const t = JSON.parse(s).totals; console.log(t.errors + t.warnings); } catch (e) { console.log(-1); }
});')
if [ "$problems" != 0 ]; then
	"$redocly" lint --extends=recommended api/openapi.yaml 2>&1 | grep -v -e '║' -e '╔' -e '╚' >&2 || true
	echo "lint-openapi: Redocly CLI reports problems in api/openapi.yaml (above)" >&2
	exit 1
fi
echo "Redocly CLI (recommended rules): no problems"
