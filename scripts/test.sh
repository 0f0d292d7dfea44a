#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what it needs
# (scripts/bootstrap.sh), then on each supported ansible-core line runs the
# unit and integration tests, plus the lint part: ansible-lint, the antsibull
# doc and changelog linters, the publishing tests (ansible-builder,
# galaxy-importer, AWX examples) and ansible-test sanity.
#
#   scripts/test.sh              everything
#   scripts/test.sh unit         unit tests only (both lines)
#   FLODL_LINES=2.19 scripts/test.sh    one ansible-core line only
set -uo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${FLODL_VENV_DIR:-$REPO_ROOT/.venv}"
WHAT="${1:-all}"
LINES="${FLODL_LINES:-2.19 2.21}"
REPORTS="$REPO_ROOT/tests/output/reports"
failures=()

step() { printf '\n==== %s\n' "$*"; }
record() { # $1 = name, $2 = exit code
  if [ "$2" -ne 0 ]; then failures+=("$1 (exit $2)"); fi
}

"$REPO_ROOT/scripts/bootstrap.sh" || exit 1
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
cd "$REPO_ROOT" || exit 1

run_pytest() { # $1 = line, $2 = label, rest = pytest args
  local line="$1" label="$2"
  shift 2
  step "pytest $label on ansible-core $line"
  "$VENV_DIR/ansible-$line/bin/python" -m pytest -p no:cacheprovider -ra \
    --junitxml="$REPORTS/$label-$line.xml" "$@"
  record "pytest $label ($line)" $?
}

if [ "$WHAT" = all ] || [ "$WHAT" = unit ]; then
  for line in $LINES; do run_pytest "$line" unit tests/unit -q; done
fi

if [ "$WHAT" = all ] || [ "$WHAT" = lint ]; then
  # The publishing tools live in the 2.19 venv (scripts/bootstrap.sh); a
  # missing one fails its step here, and its tests fail under CI=true.
  tools="$VENV_DIR/ansible-2.19/bin"
  step "ansible-lint (production profile), as in a plain checkout"
  # No ANSIBLE_COLLECTIONS_PATH: ansible.cfg resolves flodl.cluster.* from
  # the checkout, exactly as for someone running `ansible-lint` here.
  env -u ANSIBLE_COLLECTIONS_PATH PATH="$tools:$PATH" \
    "$tools/ansible-lint" --profile production -q --nocolor
  record "ansible-lint" $?
  step "antsibull-docs lint-collection-docs"
  env -u ANSIBLE_COLLECTIONS_PATH PATH="$tools:$PATH" \
    "$tools/antsibull-docs" lint-collection-docs --plugin-docs .
  record "antsibull-docs lint-collection-docs" $?
  step "antsibull-changelog lint"
  "$tools/antsibull-changelog" lint && "$tools/antsibull-changelog" lint-changelog-yaml changelogs/changelog.yaml
  record "antsibull-changelog lint" $?
  # ansible-builder create/introspect, galaxy-importer on the built tarball,
  # role READMEs and examples/awx/ (tests/publish/test_publish.py).
  run_pytest 2.19 publish tests/publish -v
  for line in $LINES; do
    step "ansible-test sanity on ansible-core $line"
    "$REPO_ROOT/scripts/sanity.sh" "$line"
    record "ansible-test sanity ($line)" $?
  done
fi

if [ "$WHAT" = all ] || [ "$WHAT" = integration ]; then
  for line in $LINES; do run_pytest "$line" integration tests/integration -v; done
fi

step "summary"
"$VENV_DIR/ansible-2.19/bin/python" "$REPO_ROOT/scripts/junit_totals.py" "$REPORTS"/*.xml
if [ "${#failures[@]}" -gt 0 ]; then
  printf 'FAILED: %s\n' "${failures[@]}"
  exit 1
fi
echo "all suites passed"
