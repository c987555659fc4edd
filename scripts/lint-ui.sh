#!/usr/bin/env bash
# Checks the dashboard: its TypeScript type-checks, its API types are the
# ones api/openapi.yaml generates, and the committed build (ui/dist, what
# tockd embeds) is what its sources build to. Fix with `make generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-ui.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd ui
npx --no-install openapi-typescript ../api/openapi.yaml --default-non-nullable false -o "$tmp/api.gen.ts" >/dev/null 2>&1
if ! cmp -s "$tmp/api.gen.ts" src/api.gen.ts; then
	echo "ui/src/api.gen.ts is not what api/openapi.yaml generates: run make generate" >&2
	exit 1
fi
npx --no-install tsc --noEmit
node build.mjs "$tmp/dist"
if ! diff -r "$tmp/dist" dist >/dev/null; then
	echo "ui/dist is not what ui/src builds to: run make generate and commit ui/dist" >&2
	diff -r --brief "$tmp/dist" dist >&2 || true
	exit 1
fi
