#!/usr/bin/env bash
# Install everything the demo and the test suite need on a fresh Debian 12
# machine (run as root): system packages, Docker + compose v2, and one venv
# per supported ansible-core line. Idempotent; a second run takes seconds.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${FLODL_VENV_DIR:-$REPO_ROOT/.venv}"
APT_PACKAGES=(
  openssh-server openssh-client iproute2 util-linux procps
  musl musl-tools docker.io debootstrap git rsync
  iptables  # the AWX job pod of the tests (tests/harness/pod.py) drops connections into it
  shellcheck  # ansible-test sanity skips its shellcheck test without it
  locales  # ansible-test runs under en_US.UTF-8, and warns when it has to fall back to C.UTF-8
)

log() { printf '[bootstrap] %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "bootstrap: run as root: namespace hosts, sshd and dockerd need it" >&2
  exit 1
fi

# System packages, the locale and the Docker tools: apt waits on Debian's mirror and the venvs below on PyPI, so on
# a fresh machine both run at once. ca-certificates first, alone: uv checks PyPI's certificate against that store.
# shellcheck source=scripts/apt.sh
. "$REPO_ROOT/scripts/apt.sh"
if ! deb_installed ca-certificates; then
  log "apt-get install ca-certificates"
  apt_install ca-certificates
fi
system_part() {
  local pkg missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    deb_installed "$pkg" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    apt_install "${missing[@]}"
  fi
  if ! locale -a 2>/dev/null | grep -qix 'en_US.utf8'; then
    log "locale en_US.UTF-8"
    localedef -i en_US -c -f UTF-8 -A /usr/share/locale/locale.alias en_US.UTF-8
  fi
  if [ -x "$REPO_ROOT/scripts/install-docker-tools.sh" ]; then
    "$REPO_ROOT/scripts/install-docker-tools.sh"
  fi
}
system_part &
system_pid=$!
# Never left running on an early exit: an apt stopped halfway would leave dpkg to be repaired by hand.
trap 'if [ -n "${system_pid:-}" ]; then wait "$system_pid" || true; fi' EXIT

find_python() {
  # $1 = major.minor; prefer the distribution's build, then pyenv's, then any on PATH. Debian's python3.11 is
  # built with PGO and LTO and runs this suite's Python (Ansible, pytest, pylint) about 15-25 % faster than
  # pyenv's default build (bench/README.md, "Stop 40"); Debian 12 has no 3.13, which comes from pyenv.
  local want="$1" candidate
  for candidate in /usr/bin/python"$want" /root/.pyenv/versions/"$want".*/bin/python"$want" \
    "$(command -v "python$want" || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

# uv builds the venvs: on this 2-CPU machine, the 2.19 venv takes uv about 5 s, and 17 s more to byte-compile
# all but the `ansible` package's collections, against pip's 77 s (bench/README.md, "Stop 38"). uv comes from
# PyPI through pip, into a venv of its own. uv reads no pip.conf: it asks PyPI itself.
UV="$VENV_DIR/uv/bin/uv"
UV_WANT='uv>=0.9,<1'
export UV_LINK_MODE=copy  # the cache and the venvs may sit on two file systems: no "failed to hardlink" warning
export UV_NATIVE_TLS=true  # the system's CA store, as pip's PIP_CERT: a TLS-inspecting proxy's CA is there
if [ ! -f "$VENV_DIR/uv/.flodl-stamp" ] || [ "$(cat "$VENV_DIR/uv/.flodl-stamp")" != "$UV_WANT" ]; then
  uv_python="$(command -v python3)" || { echo "bootstrap: python3 not found (apt-get install python3-venv)" >&2; exit 1; }
  log "uv, into $VENV_DIR/uv"
  rm -rf "$VENV_DIR/uv"
  "$uv_python" -m venv "$VENV_DIR/uv"
  # This machine's pip configuration names local package mirrors that may not exist; pip then warns
  # "Location ... is ignored" once per package, which reads like a failure. Only those lines are dropped.
  "$VENV_DIR/uv/bin/pip" install -q --disable-pip-version-check "$UV_WANT" 2>&1 |
    { grep -v "is ignored: it is neither a file nor a directory" || true; }
  "$UV" --version >/dev/null || { echo "bootstrap: uv did not install (see above)" >&2; exit 1; }
  echo "$UV_WANT" > "$VENV_DIR/uv/.flodl-stamp"
fi

make_venv() {
  # $1 = venv name, $2 = python major.minor, $3... = requirements
  local name="$1" pyver="$2"
  shift 2
  local venv="$VENV_DIR/$name" stamp="$VENV_DIR/$name/.flodl-stamp" want python
  python="$(find_python "$pyver")" || {
    echo "bootstrap: Python $pyver not found (pyenv install $pyver, or apt-get install python$pyver)" >&2
    exit 1
  }
  want="$python $*"  # another interpreter rebuilds the venv too
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  log "venv $name on $python: $*"
  rm -rf "$venv"
  # --seed: pip in the venv too, for ansible-test's --requirements.
  "$UV" venv -q --seed --python "$python" "$venv"
  "$UV" pip install -q --python "$venv/bin/python" "$@"
  # Byte-compiled here, as pip does: where PYTHONDONTWRITEBYTECODE is set (this machine sets it), no import writes
  # a .pyc, and every Ansible process would compile ansible-core anew. Not the `ansible` package's collections
  # (15,000 files for awx.awx, of which ansible-lint imports a few): a third of the time for 4,000 files.
  local site
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$venv/bin/python" -m compileall -q -j 0 -x "^$site/ansible_collections/" "$site" >/dev/null
  echo "$want" > "$stamp"
}

# The 2.19 venv also carries the publishing and AWX tools: ansible-builder
# (execution environments), galaxy-importer (what Galaxy/Automation Hub run
# on upload), the antsibull linters, ansible-runner (how AWX runs a job) and
# molecule and ansible-navigator (docs/awx.md's local run, tests/ee/test_navigator.py); plus the `ansible` package
# for awx.awx, so ansible-lint checks the
# arguments of examples/awx/configure.yml against the real modules.
# galaxy-importer caps ansible-lint, so keep the two ranges aligned.
# cryptography 51 deprecates DSA, and ansible-core (2.19 to 2.21, its ssh-agent code) imports the DSA classes
# at start: every ansible command would print a CryptographyDeprecationWarning. Capped until ansible-core stops.
# A changed list changes the stamp, so the next bootstrap rebuilds the venv.
# The two venvs at the same time: uv spends much of its time downloading.
make_venv ansible-2.19 3.11 'ansible-core>=2.19,<2.20' 'cryptography<51' 'pytest>=8' 'pytest-xdist>=3.5,<4' 'coverage>=7.5,<8' 'ansible-lint>=25,<27' \
  'ansible-builder>=3.1,<4' 'galaxy-importer>=0.4.30,<0.5' \
  'antsibull-docs>=2.16,<3' 'antsibull-changelog>=0.30,<1' \
  'ansible-runner>=2.4,<3' 'molecule>=25,<27' 'ansible>=12,<13' 'ansible-navigator>=25,<27' &
venv_219=$!
make_venv ansible-2.21 3.13 'ansible-core>=2.21,<2.22' 'cryptography<51' 'pytest>=8' 'pytest-xdist>=3.5,<4' 'coverage>=7.5,<8' 'ansible-runner>=2.4,<3' &
venv_221=$!
venvs_ok=true
wait "$venv_219" || venvs_ok=false
wait "$venv_221" || venvs_ok=false
system_ok=true
wait "$system_pid" || system_ok=false
system_pid=""
if [ "$system_ok" != true ]; then
  echo "bootstrap: the system packages or the Docker tools could not be installed (see above); run scripts/bootstrap.sh again once that is fixed" >&2
  exit 1
fi
if [ "$venvs_ok" != true ]; then
  echo "bootstrap: a venv could not be built (see above); run scripts/bootstrap.sh again once that is fixed" >&2
  exit 1
fi
core_version() { # $1 = venv name; not `ansible --version | head -1`: head closing the pipe makes ansible print a traceback
  "$VENV_DIR/$1/bin/python" -c 'from ansible.release import __version__; print(__version__)'
}
log "ready: ansible-core $(core_version ansible-2.19) / ansible-core $(core_version ansible-2.21)"
