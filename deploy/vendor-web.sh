#!/usr/bin/env bash
# Puts the browser libraries labd serves (web/vendor/package.json, exact versions pinned
# in its package-lock.json) under web/static/vendor/: `npm ci`, then a copy of the files
# the pages load. Copied, not linked: the static handler opens files with
# RESOLVE_NO_SYMLINKS. Idempotent: does nothing while the copied version matches the lock.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
src="$top/web/vendor"
dest="$top/web/static/vendor/uplot"

want=$(cd "$src" && node -p 'require("./package-lock.json").packages["node_modules/uplot"].version')
if [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$want" ]; then
  exit 0
fi
echo "vendor-web: installing uPlot $want (npm ci in web/vendor)"
(cd "$src" && npm ci --no-audit --no-fund --silent)
have=$(cd "$src" && node -p 'require("./node_modules/uplot/package.json").version')
if [ "$have" != "$want" ]; then
  echo "vendor-web: npm installed uPlot $have, the lock says $want" >&2
  exit 1
fi
install -d -m 0755 "$dest"
install -m 0644 "$src/node_modules/uplot/dist/uPlot.iife.min.js" \
                "$src/node_modules/uplot/dist/uPlot.min.css" \
                "$src/node_modules/uplot/LICENSE" "$dest/"
echo "$want" >"$dest/VERSION"
