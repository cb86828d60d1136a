#!/usr/bin/env bash
# Puts the browser libraries labd serves (web/vendor/package.json, exact versions pinned
# in its package-lock.json) under web/static/vendor/: `npm ci`, then a copy of the files
# the pages load: uPlot (charts) and xterm.js (a job's shell). Copied, not linked: the
# static handler opens files with RESOLVE_NO_SYMLINKS. Idempotent: does nothing while
# every copied version matches the lock.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
src="$top/web/vendor"
vendor="$top/web/static/vendor"

locked() { (cd "$src" && node -p "require('./package-lock.json').packages['node_modules/$1'].version"); }
current() { [ -f "$vendor/$1/VERSION" ] && [ "$(cat "$vendor/$1/VERSION")" = "$(locked "$2")" ]; }

if current uplot uplot && current xterm @xterm/xterm; then
  exit 0
fi
echo "vendor-web: installing uPlot $(locked uplot), xterm.js $(locked @xterm/xterm) (npm ci in web/vendor)"
(cd "$src" && npm ci --no-audit --no-fund --silent)

# copy <dir> <package> <files...>: the files, a LICENSE, and the version that came
copy() {
  local dir=$1 pkg=$2 want have
  shift 2
  want=$(locked "$pkg")
  have=$(cd "$src" && node -p "require('./node_modules/$pkg/package.json').version")
  if [ "$have" != "$want" ]; then
    echo "vendor-web: npm installed $pkg $have, the lock says $want" >&2
    exit 1
  fi
  install -d -m 0755 "$vendor/$dir"
  for f in "$@" LICENSE; do install -m 0644 "$src/node_modules/$pkg/$f" "$vendor/$dir/"; done
  echo "$want" >"$vendor/$dir/VERSION"
}
copy uplot uplot dist/uPlot.iife.min.js dist/uPlot.min.css
copy xterm @xterm/xterm lib/xterm.js css/xterm.css
