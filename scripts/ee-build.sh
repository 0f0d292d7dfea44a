#!/usr/bin/env bash
# Build the execution environment image the way docs/awx.md §1 does (ansible-builder 3 and the
# repository's execution-environment.yml), from a base made on this machine: no image registry
# is needed (tests/ee/ee_image.py: debootstrap rootfs, imported, plus python3 and venv).
# Prints "EE image build: N s (steps)". Needs root, docker and debootstrap
# (scripts/install-docker-tools.sh) and ansible-builder in the venv it runs with.
#
#   scripts/ee-build.sh                    # with $FLODL_VENV_DIR/ansible-2.19 (default .venv)
#   EE_PYTHON=/path/to/python scripts/ee-build.sh
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${EE_PYTHON:-${FLODL_VENV_DIR:-$REPO_ROOT/.venv}/ansible-2.19/bin/python}"
exec "$PY" "$REPO_ROOT/tests/ee/ee_image.py" build "$@"
