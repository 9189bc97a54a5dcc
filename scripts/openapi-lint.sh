#!/usr/bin/env bash
# make openapi-lint: runs two standard OpenAPI linters on the contract,
# shared/openapi/openapi.yaml. Redocly CLI's recommended rules fail on any
# error (one warning, a 4xx response on GET /openapi.json, which cannot
# fail, is ignored by shared/openapi/.redocly.lint-ignore.yaml); Spectral's
# spectral:oas rules fail on any warning.
#
# The linters come from npm, pinned by scripts/openapi-lint/package-lock.json
# and installed with `npm ci` on first use into ~/.cache/baton (keyed by the
# lock file's hash, so a version bump installs afresh and an unchanged one
# never touches the network). Redocly 1.34 rather than 2.x: 2.x needs
# Node 20.19+, and Debian bookworm's nodejs is 18.
set -euo pipefail
cd "$(dirname "$0")/.."

spec=shared/openapi/openapi.yaml
lock=scripts/openapi-lint/package-lock.json

command -v node >/dev/null && command -v npm >/dev/null || {
	echo "openapi-lint: node and npm are needed (Debian: apt-get install nodejs npm; .ci/run installs them)" >&2
	exit 1
}

hash=$(sha256sum "$lock" | cut -c1-16)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/baton/openapi-lint/$hash"
if [ ! -x "$dir/node_modules/.bin/redocly" ] || [ ! -x "$dir/node_modules/.bin/spectral" ]; then
	echo "openapi-lint: installing the pinned linters into $dir (first use only)"
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	cp scripts/openapi-lint/package.json "$lock" "$dir.tmp/"
	# No install scripts: the linters need none (one dependency's is telemetry).
	(cd "$dir.tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
fi

# No telemetry or update checks: CI is offline except for the registry.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1
"$dir/node_modules/.bin/redocly" lint --config shared/openapi/redocly.yaml --format=stylish "$spec"
"$dir/node_modules/.bin/spectral" lint --ruleset scripts/openapi-lint/spectral.yaml --fail-severity=warn "$spec"
