#!/usr/bin/env bash
# flodl.cluster demo: a 3-host cluster of network-namespace hosts on this
# machine, the example Rust project from examples/demo, and the full
# cluster_train playbook (preflight -> prebuild -> launch).
#
# Run as root:  sudo scripts/demo.sh
# It runs scripts/bootstrap.sh first (idempotent: seconds when all is installed);
# FLODL_DEMO_SKIP_BOOTSTRAP=1 skips that.
#
# What you will see:
#   1. three hosts h1, h2, h3 (each its own hostname, network and sshd);
#   2. PREFLIGHT: one ssh round trip per host, one summary line per host;
#   3. PREBUILD: one binary per libtorch variant (h1+h2 on cu128, h3 on rocm63);
#   4. LAUNCH: the environment flodl's launcher reads, then the launcher
#      STAND-IN (examples/demo/standin_launcher.py, NOT flodl's real launcher)
#      running each host's own prebuilt binary over ssh, output prefixed [h1] ...
#
# Arguments go to ansible-playbook: `scripts/demo.sh --check` shows the plan
# (probe, build commands, launch environment) and runs nothing expensive.
#
# Knobs: FLODL_DEMO_FAIL_HOST=h2:3 (make h2's rank exit 3), FLODL_DEMO_KEEP=1
# (keep the hosts and files), ANSIBLE_PLAYBOOK / ANSIBLE_GALAXY (which ansible).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
START=$(date +%s)
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
    echo "demo.sh needs root (network namespaces and sshd per host): sudo $0" >&2
    exit 2
fi

if [ -z "${FLODL_DEMO_SKIP_BOOTSTRAP:-}" ] && [ -x "$REPO/scripts/bootstrap.sh" ]; then
    say "Installing what the demo needs (scripts/bootstrap.sh)"
    "$REPO/scripts/bootstrap.sh"
fi

find_tool() {  # $1 = name; prefer the venv bootstrap created, then PATH
    local v
    for v in "${FLODL_VENV:-}" "${FLODL_VENV_DIR:-$REPO/.venv}/ansible-2.19" "${FLODL_VENV_DIR:-$REPO/.venv}/ansible-2.21"; do
        if [ -n "$v" ] && [ -x "$v/bin/$1" ]; then echo "$v/bin/$1"; return; fi
    done
    command -v "$1" || { echo "$1 not found: run scripts/bootstrap.sh first" >&2; exit 2; }
}
ANSIBLE_PLAYBOOK="${ANSIBLE_PLAYBOOK:-$(find_tool ansible-playbook)}"
ANSIBLE_GALAXY="${ANSIBLE_GALAXY:-$(find_tool ansible-galaxy)}"
PY="$(dirname "$ANSIBLE_PLAYBOOK")/python3"
[ -x "$PY" ] || PY="$(command -v python3)"
export PATH="$HOME/.cargo/bin:/root/.cargo/bin:$PATH"
command -v cargo >/dev/null || { echo "cargo not found: run scripts/bootstrap.sh first" >&2; exit 2; }

STATE="$(mktemp -d /tmp/flodl-demo.XXXXXX)"
mkdir -p /var/tmp/flodl-cluster-tests && chmod 755 /var/tmp/flodl-cluster-tests
SHARED="$(mktemp -d /var/tmp/flodl-cluster-tests/demo.XXXXXX)"   # outside /tmp: every host sees it
chmod 755 "$SHARED"
# shellcheck disable=SC2317  # reached through the trap below
cleanup() {
    local rc=$?
    if [ -z "${FLODL_DEMO_KEEP:-}" ]; then
        say "Tearing the demo hosts down"
        "$PY" "$REPO/tests/harness/netns_cluster.py" down --state "$STATE/cluster" || true
        rm -rf "$STATE" "$SHARED"
    else
        echo "kept: hosts state $STATE/cluster, project $SHARED/demo (stop with: $PY $REPO/tests/harness/netns_cluster.py down --state $STATE/cluster)"
    fi
    exit "$rc"
}
trap cleanup EXIT INT TERM

say "Starting 3 namespace hosts h1 h2 h3 (real sshd each, shared filesystem)"
"$PY" "$REPO/tests/harness/netns_cluster.py" up --hosts h1,h2,h3 --state "$STATE/cluster"

say "Copying the example project to $SHARED/demo (the shared project mount)"
mkdir -p "$SHARED/demo" "$SHARED/data"   # data: the shared dataset mount every host checks
tar -C "$REPO/examples/demo" --exclude=./target -cf - . | tar -C "$SHARED/demo" -xf -

say "Building and installing the flodl.cluster collection from its tarball"
quiet() {  # run, show the output only on failure
    if ! "$@" >"$STATE/step.log" 2>&1; then cat "$STATE/step.log" >&2; return 1; fi
}
quiet "$ANSIBLE_GALAXY" collection build "$REPO" --output-path "$STATE" --force
quiet "$ANSIBLE_GALAXY" collection install "$STATE"/flodl-cluster-*.tar.gz -p "$STATE/collections" --force --offline
echo "installed into $STATE/collections"

say "Writing the inventory (h1, h2: precompiled/cu128; h3: precompiled/rocm63)"
FAIL_HOST="${FLODL_DEMO_FAIL_HOST:-}" "$PY" - "$REPO" "$STATE" "$SHARED/demo" <<'EOF'
import json, os, sys
repo, state, project = sys.argv[1:4]
sys.path.insert(0, os.path.join(repo, "tests", "harness"))
from netns_cluster import Cluster
cluster = Cluster.load(os.path.join(state, "cluster"))
env = {"FLODL_DEMO_STEPS": "3", "FLODL_DEMO_STEP_MS": "200"}
if os.environ.get("FAIL_HOST"):
    env["FLODL_DEMO_FAIL_HOST"] = os.environ["FAIL_HOST"]
group_vars = {
    "flodl_controller_host": cluster.controller_ip,
    "flodl_controller_path": project,
    "flodl_cmd": "train",
    "flodl_fdl_env": "cluster",
    "flodl_controller_data_path": os.path.join(os.path.dirname(project), "data"),
    "flodl_cluster_env": env,
    # The stand-in for flodl's launcher (see examples/demo/standin_launcher.py).
    "flodl_launch_command": "python3 standin_launcher.py --epochs 3",
}
arch = {"h1": "precompiled/cu128", "h2": "precompiled/cu128", "h3": "precompiled/rocm63"}
devices = {"h1": [0], "h2": [0, 1], "h3": [0]}
host_vars = {
    h: {"flodl_path": project, "flodl_arch": arch[h], "flodl_local_devices": devices[h],
        "flodl_nccl_socket_ifname": "eth0", "flodl_data_path": os.path.join(os.path.dirname(project), "data")}
    for h in arch
}
cluster.write_inventory(os.path.join(state, "inventory.json"), group_vars, host_vars)
print(json.dumps(group_vars, indent=2))
EOF

say "Running: ansible-playbook flodl.cluster.cluster_train"
set +e
ANSIBLE_COLLECTIONS_PATH="$STATE/collections" \
ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false \
ANSIBLE_HOST_KEY_CHECKING=false \
ANSIBLE_RETRY_FILES_ENABLED=false \
ANSIBLE_LOCAL_TEMP="$STATE/ansible-local" \
    "$ANSIBLE_PLAYBOOK" -i "$STATE/inventory.json" flodl.cluster.cluster_train "$@"
RC=$?
set -e

say "Demo finished in $(( $(date +%s) - START ))s: cluster_train exited $RC"
exit "$RC"
