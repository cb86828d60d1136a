#!/usr/bin/env bash
# bench/setup.sh - installs the peers `make bench` measures labd against, in places
# of their own (never part of `make test`, never over Debian's Python):
#   /opt/labd/bench/hub   a venv from Debian's python3 with jupyterhub==$HUB_VERSION
#   /opt/labd/bench/chp   configurable-http-proxy@$CHP_VERSION from npm
# JupyterLab itself is the runtime's own environment (/opt/labd/jupyter, made by
# deploy/install-deps.sh): both sides of the start-to-ready benchmark spawn the same one.
# Idempotent: each part is (re)installed only when its pinned version is missing.
set -euo pipefail

HUB_VERSION=6.1.1
CHP_VERSION=5.3.0
BENCH_DIR=${BENCH_DIR:-/opt/labd/bench}
HUB=$BENCH_DIR/hub
CHP=$BENCH_DIR/chp

say() { printf 'bench setup: %s\n' "$*" >&2; }

hub_version() { "$HUB/bin/python" -c 'import jupyterhub; print(jupyterhub.__version__)' 2>/dev/null || true; }
chp_version() { "$CHP/node_modules/.bin/configurable-http-proxy" --version 2>/dev/null || true; }

mkdir -p "$BENCH_DIR"
if [ "$(hub_version)" != "$HUB_VERSION" ]; then
	say "installing jupyterhub==$HUB_VERSION into $HUB"
	rm -rf "$HUB"
	/usr/bin/python3 -m venv "$HUB"
	timeout 600 "$HUB/bin/pip" install --disable-pip-version-check -q "jupyterhub==$HUB_VERSION"
fi
if [ "$(chp_version)" != "$CHP_VERSION" ]; then
	say "installing configurable-http-proxy@$CHP_VERSION into $CHP"
	rm -rf "$CHP"
	mkdir -p "$CHP"
	# A package.json of its own so npm installs here, not in a parent project.
	printf '{"name":"labd-bench-chp","private":true}\n' >"$CHP/package.json"
	(cd "$CHP" && timeout 600 npm install --no-audit --no-fund --save-exact -q \
		"configurable-http-proxy@$CHP_VERSION" >&2)
fi
say "jupyterhub $(hub_version), configurable-http-proxy $(chp_version)"
[ "$(hub_version)" = "$HUB_VERSION" ] && [ "$(chp_version)" = "$CHP_VERSION" ]
