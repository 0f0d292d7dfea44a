#!/usr/bin/env bash
# ansible-test sanity for one ansible-core line. ansible-test needs the
# collection under ansible_collections/<ns>/<name>, so it runs on a copy.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LINE="${1:-2.19}"
VENV_DIR="${FLODL_VENV_DIR:-$REPO_ROOT/.venv}"
VENV="$VENV_DIR/ansible-$LINE"
PY="$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# Outside the checkout: inside it, ansible-test would ask git for the file
# list and find the (git-ignored) copy empty.
# A private directory per run: concurrent runs (two checkouts, two lines) must not share a copy.
# Without shellcheck, ansible-test skips that test with a mere warning.
command -v shellcheck >/dev/null || { echo "sanity: shellcheck not found (scripts/bootstrap.sh installs it)" >&2; exit 1; }
TOP="$(mktemp -d "${TMPDIR:-/tmp}/flodl-cluster-sanity-$LINE.XXXXXX")"
trap 'rm -rf "$TOP"' EXIT
WORK="$TOP/ansible_collections/flodl/cluster"

# ansible-test bootstraps pip from a host this machine cannot reach; give it
# the offline equivalent under the names it looks for.
mkdir -p "$HOME/.ansible/test/cache"
# Copied then renamed: the other line's sanity run may be reading the file at that moment.
for version in 24.2 25.2 25.3 26.0; do
  dest="$HOME/.ansible/test/cache/get_pip_${version//./_}.py"
  cp "$REPO_ROOT/scripts/ansible-test-get-pip.py" "$dest.$$" && mv -f "$dest.$$" "$dest"
done

# The stand-in installs each sanity venv's pip with uv when uv is on PATH (scripts/bootstrap.sh puts it in
# the venv dir): a directory holding uv alone, so that the uv venv's python and pip shadow nothing.
if [ -x "$VENV_DIR/uv/bin/uv" ]; then
  mkdir -p "$TOP/uv-bin"
  ln -s "$VENV_DIR/uv/bin/uv" "$TOP/uv-bin/uv"
  PATH="$TOP/uv-bin:$PATH"
fi

# ansible-test keys its sanity venvs by Python version and requirements, not by interpreter: a venv made from
# another 3.x build (bootstrap.sh switched the line's interpreter) would go on running every sanity test there.
HOME_OF_LINE="$(sed -n 's/^home = //p' "$VENV/pyvenv.cfg")"
for cfg in "$HOME"/.ansible/test/venv/*/"$PY"/*/pyvenv.cfg; do
  [ -f "$cfg" ] || continue
  if [ "$(sed -n 's/^home = //p' "$cfg")" != "$HOME_OF_LINE" ]; then rm -rf "$(dirname "$cfg")"; fi
done

mkdir -p "$WORK"
rsync -a \
  --exclude .git --exclude .cache --exclude .venv --exclude tests/output \
  --exclude target --exclude .cargo-home --exclude __pycache__ \
  "$REPO_ROOT/" "$WORK/"
cd "$WORK"
"$VENV/bin/ansible-test" sanity --python "$PY" --requirements --color no "${@:2}"
