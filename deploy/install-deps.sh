#!/usr/bin/env bash
# Installs everything labd's build, demo and tests need on Debian 12, as root; the same
# names, mapped below, on Ubuntu 24.04. Idempotent: packages already present are not
# touched, and apt is only run when something is missing, so `make run` and `make test`
# can call it every time.
#
# usage: install-deps.sh [--server] [--print]
#   --server: only what building and running labd needs (a production host,
#   docs/install.md): no test tools, browsers, test frameworks or PyTorch.
#   --print: print the package names for this OS and change nothing (LABD_OS_RELEASE
#   names another os-release file: what Ubuntu would get, asked on Debian).
set -euo pipefail
server_only=false
print_only=false
for a in "$@"; do
  case "$a" in
    --server) server_only=true ;;
    --print) print_only=true ;;
    *) echo "usage: install-deps.sh [--server] [--print]" >&2; exit 2 ;;
  esac
done

packages=(
  # build; libclang-rt-14-dev holds clang 14's sanitizer and libFuzzer runtimes (make fuzz)
  build-essential pkg-config clang libclang-rt-14-dev
  libmicrohttpd-dev libsqlite3-dev libseccomp-dev libcgroup-dev libssl-dev
  libjansson-dev libinih-dev libcmocka-dev libhttp-parser-dev libcsv-dev
  # single sign-on: the back channel to the OpenID Provider (discovery, tokens, keys)
  libcurl4-openssl-dev
  # training jobs: metric regexes checked at submit (and applied to logs) with PCRE2
  libpcre2-dev
  # runtime helpers (sandbox homes, tests)
  e2fsprogs util-linux iproute2 procps curl sqlite3 python3 python3-pytest python3-pytest-xdist bubblewrap
  # the integration suite checks every JSON answer against docs/openapi.yaml
  python3-jsonschema python3-yaml
  # Notebook 6 and plain Jupyter Server (kept as runtimes: [runtime] jupyter);
  # python3-venv makes labd's JupyterLab environment (deploy/jupyter/install.sh)
  jupyter-notebook python3-jupyter-server python3-venv
  # runtime egress: pasta (user-mode networking) and nft (root's filter in the sandbox)
  passt nftables
  # real-browser tests
  chromium
  # the HTTPS front the tests put before labd (deploy/nginx/, test_https_front.py), and
  # certutil, with which https_front.test.mjs has Chromium trust the tests' own CA
  nginx-light libnss3-tools
  # runtime images (deploy/image/build; test_images.py builds a small one)
  debootstrap
  # promtool, which checks GET /metrics in the tests (the server is not started by labd)
  prometheus
  # PyTorch (CPU) for the training-job tests (tests/integration/jobs_scripts/cnn.py):
  # Debian's build, into Debian's python3, which job sandboxes see read-only
  python3-torch
  # the disk benchmark: a runtime's home against the host's disk (bench/disk-bench.py)
  fio
  # the Slurm tests' private cluster (tests/slurm/: munged, slurmctld, two slurmd) and
  # the Slurm backend's client tools (sbatch, squeue, scontrol, scancel) on a head
  slurmctld slurmd slurm-client munge
)

# What only the tests, fuzzing and benchmarks use (left out by --server).
test_only=(clang libclang-rt-14-dev libcmocka-dev python3-pytest python3-pytest-xdist
  python3-jsonschema python3-yaml chromium debootstrap prometheus python3-torch bubblewrap fio
  slurmctld slurmd slurm-client munge)
if $server_only; then
  keep=()
  for p in "${packages[@]}"; do
    [[ " ${test_only[*]} " == *" $p "* ]] || keep+=("$p")
  done
  packages=("${keep[@]}")
fi

# Debian 12 names above; Ubuntu 24.04 (noble, with universe enabled) has all of them
# but these (a labd copied there without these packages lacks libmicrohttpd.so.12,
# libcgroup.so.2, libinih.so.1 and libhttp_parser.so.2.9: docs/install.md):
#   Debian 12             Ubuntu 24.04
#   libclang-rt-14-dev    libclang-rt-18-dev   (clang 18 is noble's clang)
#   chromium              chromium-browser     (a snap there: the browser tests want a deb)
os_id=$(. "${LABD_OS_RELEASE:-/etc/os-release}" && echo "${ID:-}")
rename() { # rename FROM TO: one package's name on this OS
  for i in "${!packages[@]}"; do [ "${packages[$i]}" != "$1" ] || packages[$i]=$2; done
}
case "$os_id" in
  debian) ;;
  ubuntu)
    rename libclang-rt-14-dev libclang-rt-18-dev
    rename chromium chromium-browser ;;
  *) echo "install-deps: $os_id is not Debian or Ubuntu: install the packages of" \
          "deploy/install-deps.sh by their names there" >&2
     exit 1 ;;
esac

if $print_only; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: must run as root (it uses apt-get and useradd)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# Node.js may come from another source than Debian; only ask apt when absent.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # labd wants the packages' programs, not their services (prometheus would start
  # a server): keep apt from starting any while it installs.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # Nor enabled for the next boot, when it was installed here only for promtool, or
  # for the Slurm tests, which start their own private munged, slurmctld and slurmd
  # from a temp dir (a site's own Slurm is configured by its admin, docs/slurm.md).
  # (systemctl disable works offline too: on a machine booted without systemd it
  # removes the links the packages made.)
  if command -v systemctl >/dev/null 2>&1; then
    for unit in prometheus munge slurmctld slurmd; do
      [[ " ${missing[*]} " != *" $unit "* ]] || systemctl disable "$unit" >/dev/null 2>&1 || true
    done
  fi
fi

# The unprivileged user the web process drops to.
if ! getent passwd labd >/dev/null; then
  useradd --system --no-create-home --home-dir /nonexistent \
          --shell /usr/sbin/nologin labd
  echo "install-deps: created system user labd"
fi

# labd's JupyterLab environment, the default runtime ([runtime] jupyter_env):
# rebuilt only when deploy/jupyter/requirements.txt changed.
bash "$(dirname "$0")/jupyter/install.sh" /opt/labd/jupyter

# playwright-core drives Debian's chromium in the browser tests.
top=$(cd "$(dirname "$0")/.." && pwd)
if ! $server_only && [ ! -d "$top/tests/e2e/node_modules/playwright-core" ] && [ -f "$top/tests/e2e/package.json" ]; then
  (cd "$top/tests/e2e" && npm ci --no-audit --no-fund --silent 2>/dev/null ||
                          npm install --no-audit --no-fund --silent)
fi

# The single sign-on tests' OpenID Provider (npm oidc-provider, pinned in
# tests/oidc/package-lock.json), started on loopback by the tests.
if [ ! -d "$top/tests/oidc/node_modules/oidc-provider" ] && [ -f "$top/tests/oidc/package.json" ]; then
  (cd "$top/tests/oidc" && npm ci --no-audit --no-fund --silent)
fi

# The browser libraries labd serves, pinned in web/vendor (npm): uPlot (charts of the
# admin console and dashboard) and xterm.js (the shell of a job page).
bash "$top/deploy/vendor-web.sh"
