#!/usr/bin/env bash
# Creates labd's JupyterLab environment (docs/config.md, [runtime] jupyter_env):
# a venv of Debian's /usr/bin/python3 with --system-site-packages (so that
# `pip install --user` works inside a runtime: a plain venv refuses --user)
# holding exactly deploy/jupyter/requirements.txt.
#
# Idempotent: the venv keeps the sha256 of the requirements it was built from
# in .labd-requirements.sha256; it is rebuilt only when that stamp is missing
# or different (or jupyter-lab is gone). The stamp is written last, so an
# interrupted build is redone next time. Runtimes bind the env read-only:
# rebuilding under running ones breaks their Jupyter, so stop them first.
#
# labd's own files in the env (its contents manager, labd_contents.py, and the
# config that selects it) are put in place on every run, build or not: they
# are small and a changed one must reach an env that is otherwise current.
#
# usage: install.sh [ENV_DIR]   (default /opt/labd/jupyter), as root
#        install.sh --labd-files ENV_DIR   only labd's own files, into an env
#                                          made elsewhere (deploy/image/build)
set -euo pipefail

files_only=0
if [ "${1:-}" = --labd-files ]; then
  files_only=1
  shift
fi
env_dir=${1:-/opt/labd/jupyter}
here=$(cd "$(dirname "$0")" && pwd)
req=$here/requirements.txt
stamp=$env_dir/.labd-requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)

# Copies a file only when it differs, as a new file renamed into place, so a
# Jupyter starting meanwhile reads the old or the new one, never half of one.
put() {
  [ -f "$2" ] && cmp -s "$1" "$2" && return 0
  mkdir -p "$(dirname "$2")"
  install -m 0644 "$1" "$2.new.$$"
  mv -f "$2.new.$$" "$2"
}

# The venv's one site-packages, found without running its Python (an image's env
# runs only inside the image).
labd_files() {
  local site
  site=$(echo "$env_dir"/lib/python3*/site-packages)
  [ -d "$site" ] || { echo "jupyter env: no single site-packages in $env_dir/lib" >&2; exit 1; }
  put "$here/labd_contents.py" "$site/labd_contents.py"
  put "$here/jupyter_server_config.json" "$env_dir/etc/jupyter/jupyter_server_config.json"
}

if [ "$files_only" = 1 ]; then
  umask 022
  labd_files
  exit 0
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$env_dir/bin/jupyter-lab" ]; then
  umask 022
  labd_files
  "$env_dir/bin/python" -c 'import labd_contents' # fails loudly
  exit 0
fi

# Not the python3 first on PATH (pyenv and the like): the sandbox sees the
# host's /usr, and the venv's python is a link to its interpreter.
python=/usr/bin/python3
if ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
  echo "jupyter env: $python lacks venv/ensurepip (apt-get install python3-venv)" >&2
  exit 1
fi

echo "jupyter env: building $env_dir from $req"
umask 022 # the sandbox's uid reads and runs it
mkdir -p "$(dirname "$env_dir")"
old=""
if [ -e "$env_dir" ]; then
  old=$env_dir.old.$$
  mv "$env_dir" "$old"
fi
"$python" -m venv --system-site-packages "$env_dir"
# --no-deps: the file is the whole, frozen environment. --ignore-installed: the
# system site (Debian's jupyter-notebook and its libraries) must not satisfy a
# pin with another version.
PIP_DISABLE_PIP_VERSION_CHECK=1 "$env_dir/bin/pip" install --quiet --no-input --no-deps \
  --ignore-installed -r "$req"
labd_files
"$env_dir/bin/python" -c 'import jupyterlab, ipykernel, jupyterlab_git, labd_contents' # fails loudly
[ -z "$old" ] || rm -rf "$old"
echo "$want" >"$stamp"
echo "jupyter env: ready ($("$env_dir/bin/jupyter-lab" --version))"
