#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what it needs
# (scripts/bootstrap.sh), then on each supported ansible-core line runs the
# unit and integration tests, plus the lint part: ansible-lint, the antsibull
# doc and changelog linters, the publishing tests (ansible-builder,
# galaxy-importer, AWX examples) and ansible-test sanity, and the molecule
# scenarios (extensions/molecule/, on the namespace hosts).
#
#   scripts/test.sh              everything
#   scripts/test.sh unit         unit tests only (both lines)
#   scripts/test.sh molecule     the molecule scenarios (extensions/molecule/), 2.19 line
#   scripts/test.sh ee           the execution environment: image build, then a job in it
#   FLODL_LINES=2.19 scripts/test.sh    one ansible-core line only
#   FLODL_SERIAL=1 scripts/test.sh      each line after the other (by default the two lines of a
#                                       part run at the same time)
#   FLODL_PARALLEL_PARTS=0              the parts one after the other, the EE last (by default the
#                                       integration part and the unit part run beside the lint part, where
#                                       ansible-test sanity runs beside the other lint steps, and the EE
#                                       and molecule after them)
#   FLODL_COVERAGE_LINE=2.21            the line whose unit tests run under coverage.py (2.19)
#   FLODL_INTEGRATION_WORKERS=N         pytest-xdist processes per line for the integration tests (3;
#                                       1 = no xdist). Figures of each layout: bench/README.md
set -uo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${FLODL_VENV_DIR:-$REPO_ROOT/.venv}"
WHAT="${1:-all}"
LINES="${FLODL_LINES:-2.19 2.21}"
REPORTS="$REPO_ROOT/tests/output/reports"
FAILURES="$REPORTS/failures.txt"  # a file, not a variable: parts that run in the background record too
SUITE_STARTED=$SECONDS

step() { printf '\n==== %s (at %d s)\n' "$*" "$((SECONDS - SUITE_STARTED))"; }  # when it started, for the timeline
record() { # $1 = name, $2 = exit code
  if [ "$2" -ne 0 ]; then echo "$1 (exit $2)" >>"$FAILURES"; fi
}

"$REPO_ROOT/scripts/bootstrap.sh" || exit 1
# Without pyenv's shims from here on: a shim is a bash script that runs `pyenv exec`, 0.16 CPU-s for each
# `python3` the tests start on this machine (launch commands, stand-ins); the system's python3 starts in 0.02.
PATH="$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/\.pyenv/' | paste -sd: -)"
export PATH
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
cd "$REPO_ROOT" || exit 1

run_pytest() { # $1 = line, $2 = label, rest = pytest args; COVER=<data file>: under coverage.py
  local line="$1" label="$2" runner=(-m pytest)
  shift 2
  if [ -n "${COVER:-}" ]; then runner=(-m coverage run --data-file="$COVER" -m pytest); fi
  step "pytest $label on ansible-core $line"
  "$VENV_DIR/ansible-$line/bin/python" "${runner[@]}" -p no:cacheprovider -ra \
    --junitxml="$REPORTS/$label-$line.xml" "$@"
  local rc=$?
  record "pytest $label ($line)" $rc
  return $rc
}

# Runs one command per ansible-core line, the lines at the same time: each line's run waits on ssh, sleeps
# and timeouts of its hosts for much of its wall time, which the other line fills. Each line writes its
# own log, printed whole when it ends (no interleaving). $1 = label, rest = the command, where the word
# @LINE@ stands for the line. FLODL_SERIAL=1: one line after the other, output as it comes.
per_line() {
  local label="$1" line log pids=()
  shift
  for line in $LINES; do
    log="$REPORTS/${label// /-}-$line.log"
    # A subshell either way: the line's own exit status is recorded here, once.
    if [ "${FLODL_SERIAL:-}" = 1 ]; then
      (started=$SECONDS; "${@//@LINE@/$line}"; rc=$?; echo "$label on ansible-core $line: $((SECONDS - started))s"
       exit $rc)
      record "$label ($line)" $?
    else
      (started=$SECONDS; "${@//@LINE@/$line}"; rc=$?; echo "$label on ansible-core $line: $((SECONDS - started))s"
       exit $rc) >"$log" 2>&1 &
      pids+=("$!")
    fi
  done
  local i=0
  for line in $LINES; do
    [ "${#pids[@]}" -gt "$i" ] || break
    wait "${pids[$i]}"
    record "$label ($line)" $?
    cat "$REPORTS/${label// /-}-$line.log"
    i=$((i + 1))
  done
}

unit_line() { # $1 = line. On FLODL_COVERAGE_LINE (2.19) under coverage.py (.coveragerc: branch coverage of
  # plugins/), then its report; the other line runs the same tests plainly (coverage.py's tracer roughly
  # doubles the part's CPU on a 2-CPU machine shared with the integration lane, and the figure is one per suite).
  if [ "$1" != "${FLODL_COVERAGE_LINE:-2.19}" ]; then
    run_pytest "$1" unit tests/unit -q
    return
  fi
  COVER="$REPORTS/unit-$1.coverage" run_pytest "$1" unit tests/unit -q
  step "branch coverage of plugins/ by the unit tests on ansible-core $1 (fully covered files left out)"
  "$VENV_DIR/ansible-$1/bin/python" -m coverage report --precision 1 --data-file="$REPORTS/unit-$1.coverage"
  record "coverage report ($1)" $?
}

integration_part() {
  # Each line's tests in FLODL_INTEGRATION_WORKERS processes (pytest-xdist, a test file per process at a
  # time: a module's shared cluster stays in one process). Much of a test's wall time is waiting on its
  # hosts (handshakes, timeouts, sleeps), so the 2 CPUs are far from busy with one process per line.
  local workers="${FLODL_INTEGRATION_WORKERS:-3}" xdist=()
  if [ "$workers" -gt 1 ]; then xdist=(-n "$workers" --dist loadfile); fi
  per_line "integration" run_pytest @LINE@ integration tests/integration -v "${xdist[@]}"
}

molecule_part() {
  # molecule test from extensions/ (the collection layout), every scenario, against the collection as
  # installed from its tarball, as the integration tests do. Missing molecule: skipped with a
  # how-to, a failure under CI=true.
  local tools="$VENV_DIR/ansible-2.19/bin" mol_work scenario scenario_yml
  step "molecule test, every scenario of extensions/molecule, on ansible-core 2.19"
  if [ ! -x "$tools/molecule" ]; then
    if [ "${CI:-}" = true ]; then
      echo "molecule is not installed in $VENV_DIR/ansible-2.19 (required under CI=true): run scripts/bootstrap.sh"
      record "molecule" 1
    else
      echo "SKIPPED: molecule is not installed in $VENV_DIR/ansible-2.19; run scripts/bootstrap.sh"
    fi
  else
    mol_work="$(mktemp -d /tmp/flodl-molecule.XXXXXX)"
    local started=$SECONDS
    if "$tools/ansible-galaxy" collection build "$REPO_ROOT" --output-path "$mol_work" --force >/dev/null &&
      "$tools/ansible-galaxy" collection install "$mol_work"/flodl-cluster-*.tar.gz -p "$mol_work/collections" \
        --force --offline >/dev/null 2>&1; then
      # One `molecule test -s` per scenario. molecule keeps each scenario's ephemeral directory under
      # ANSIBLE_HOME, named after the basename "extensions" only, which every checkout of this collection
      # shares (concurrent runs would tear each other's hosts down): an ANSIBLE_HOME of this run's own.
      # Not MOLECULE_EPHEMERAL_DIRECTORY: that is one directory for every scenario molecule loads, whose
      # shared state then warns that the other scenario's molecule.yml "has been modified".
      # The installed tarball comes first in ANSIBLE_COLLECTIONS_PATH; sys.path is still scanned (after
      # it): with ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false, molecule warns that it cannot patch its paths.
      for scenario_yml in "$REPO_ROOT"/extensions/molecule/*/molecule.yml; do
        scenario="$(basename "$(dirname "$scenario_yml")")"
        (cd "$REPO_ROOT/extensions" &&
          ANSIBLE_HOME="$mol_work/ansible-home" PATH="$tools:$PATH" \
            ANSIBLE_COLLECTIONS_PATH="$mol_work/collections" \
            "$tools/molecule" test -s "$scenario")
        record "molecule $scenario" $?
      done
    else
      echo "molecule: building or installing the collection tarball failed"
      record "molecule" 1
    fi
    echo "molecule: $((SECONDS - started))s"
    rm -rf "$mol_work"
  fi
}

run_ee() {
  # The execution environment (docs/awx.md §1): the image built with ansible-builder from a base made
  # here (its own timed step), then one cluster_train job in it (tests/ee/). Once per test command:
  # the image carries its own ansible-core. Caches: the rootfs tar in FLODL_TEST_CACHE_DIR, Docker's layers.
  step "EE image build (ansible-builder, execution-environment.yml)"
  local started=$SECONDS
  local rc=0
  "$REPO_ROOT/scripts/ee-build.sh" || rc=$?
  record "EE image build" $rc
  echo "EE image build step: $((SECONDS - started)) s"
  EE_BUILD_SECONDS=$((SECONDS - started))
  [ "$rc" -eq 0 ] || return 0  # no image: the job cannot run (the failure is recorded above)
  started=$SECONDS
  FLODL_EE_IMAGE_BUILT=1 run_pytest 2.19 ee tests/ee -v
  echo "EE job step: $((SECONDS - started)) s"
}

# The whole suite: the integration part starts first, beside the unit and lint parts (their output is printed
# whole when they end). In the lint part, ansible-test sanity starts first, beside the other lint steps; the
# execution environment (its image build timed on its own line) and molecule follow them, beside sanity.
integration_lane=""
unit_lane=""
sanity_lane=""
PARALLEL=false
if [ "$WHAT" = all ] && [ "${FLODL_PARALLEL_PARTS:-1}" != 0 ]; then PARALLEL=true; fi
if [ "$PARALLEL" = true ]; then
  step "integration tests started beside the other parts (their output follows when they end)"
  # Process groups of their own (set -m), so that an interrupted suite stops all of it, by those groups.
  set -m
  integration_part >"$REPORTS/integration-part.log" 2>&1 &
  integration_lane=$!
  # The unit tests mostly wait too (their own timeouts, sleeps and processes): the lint steps do not wait
  # for them, and they do not wait for the lint steps.
  step "unit tests started beside the lint part (their output follows when they end)"
  per_line "unit" unit_line @LINE@ >"$REPORTS/unit-part.log" 2>&1 &
  unit_lane=$!
  set +m
fi

if [ -z "$unit_lane" ] && { [ "$WHAT" = all ] || [ "$WHAT" = unit ]; }; then
  per_line "unit" unit_line @LINE@
fi

sanity_line() { # $1 = line
  step "ansible-test sanity on ansible-core $1"
  # Its venvs first, at normal priority: on a fresh machine they mostly wait on PyPI, beside the tests' CPU.
  local venvs_log="$REPORTS/sanity-venvs-$1.log"
  if ! "$REPO_ROOT/scripts/sanity.sh" "$1" --prime-venvs >"$venvs_log" 2>&1; then
    cat "$venvs_log"
    echo "ansible-test sanity on ansible-core $1: making its venvs failed (above)"
    return 1
  fi
  # Then the analysis at the lowest CPU priority: it has no time bound, so the timed tests get the CPU first and
  # it takes what they leave (bench/README.md, stop 41).
  nice -n 19 "$REPO_ROOT/scripts/sanity.sh" "$1"
}
if [ "$PARALLEL" = true ]; then
  # On a fresh machine each line's sanity makes 9 venvs, mostly waiting on PyPI (stop 40 in bench/README.md):
  # the lint steps below run in that wait instead of after it.
  step "ansible-test sanity started beside the other lint steps (its output follows when it ends)"
  set -m
  per_line "ansible-test sanity" sanity_line @LINE@ >"$REPORTS/sanity-part.log" 2>&1 &
  sanity_lane=$!
  set +m
  trap 'kill -TERM -- "-$integration_lane" "-$unit_lane" "-$sanity_lane" 2>/dev/null; exit 130' INT TERM
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
  if [ -z "$sanity_lane" ]; then per_line "ansible-test sanity" sanity_line @LINE@; fi
fi

EE_BUILD_SECONDS=0
if [ "$PARALLEL" = true ]; then
  # The EE mostly waits too (apt and pip inside the image build): beside sanity and the integration part
  # instead of after them.
  run_ee
  # Molecule too: with sanity in the background, this lane's own steps end long before the integration part.
  molecule_part
  wait "$sanity_lane"
  cat "$REPORTS/sanity-part.log"
fi

if [ "$WHAT" = molecule ] || { [ "$WHAT" = all ] && [ "$PARALLEL" = false ]; }; then
  molecule_part
fi

if [ -n "$unit_lane" ]; then
  wait "$unit_lane"
  cat "$REPORTS/unit-part.log"
fi
if [ -n "$integration_lane" ]; then
  wait "$integration_lane"
  cat "$REPORTS/integration-part.log"
elif [ "$WHAT" = all ] || [ "$WHAT" = integration ]; then
  integration_part
fi

if [ "$PARALLEL" = false ] && { [ "$WHAT" = all ] || [ "$WHAT" = ee ]; }; then run_ee; fi

step "summary"
total=$((SECONDS - SUITE_STARTED))
if [ "$PARALLEL" = true ]; then
  echo "time: ${total} s in all (the EE image build, ${EE_BUILD_SECONDS} s, ran beside the other parts)"
elif [ "$EE_BUILD_SECONDS" -gt 0 ]; then
  echo "time: ${total} s in all; without the EE image build (${EE_BUILD_SECONDS} s, a step of its own): $((total - EE_BUILD_SECONDS)) s"
else
  echo "time: ${total} s"
fi
reports=("$REPORTS"/*.xml)
if [ -e "${reports[0]}" ]; then  # none when only the molecule part ran
  "$VENV_DIR/ansible-2.19/bin/python" "$REPO_ROOT/scripts/junit_totals.py" "${reports[@]}"
fi
if [ -s "$FAILURES" ]; then
  sed 's/^/FAILED: /' "$FAILURES"
  exit 1
fi
echo "all suites passed"
