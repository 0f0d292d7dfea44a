#!/usr/bin/env bash
# Prepare ee/ for `ansible-builder build -f execution-environment.yml`: build this checkout's
# collection tarball into ee/ and write ee/requirements.yml naming it, so no version is ever
# written by hand (the name follows galaxy.yml). Run from anywhere; needs ansible-galaxy.
#
#   scripts/ee-prepare.sh            # into ee/ of this checkout
#   scripts/ee-prepare.sh DIR        # into DIR (a copy of ee/), as tests/publish does
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EE_DIR="${1:-$REPO_ROOT/ee}"
GALAXY="${ANSIBLE_GALAXY:-ansible-galaxy}"

rm -f "$EE_DIR"/flodl-cluster-*.tar.gz  # an older tarball would be copied into the image too
"$GALAXY" collection build --force --output-path "$EE_DIR" "$REPO_ROOT" >/dev/null
tarballs=("$EE_DIR"/flodl-cluster-*.tar.gz)
tarball="$(basename "${tarballs[0]}")"
cat >"$EE_DIR/requirements.yml" <<EOF
---
# Written by scripts/ee-prepare.sh (not kept in git): the collection tarball it built next to this
# file, which execution-environment.yml copies into the image's build context as collections/.
collections:
  - name: collections/$tarball
    type: file
EOF
echo "ee-prepare: $EE_DIR/$tarball and $EE_DIR/requirements.yml are ready; next:"
# -c: ansible-builder's build context outside the checkout (its default is context/ in the current directory).
echo "  ansible-builder build -f execution-environment.yml -c /tmp/flodl-cluster-ee-context" \
  "-t flodl-cluster-ee:${tarball#flodl-cluster-}" | sed 's/\.tar\.gz$//'
