"""Prebuild phase, end to end: real cargo builds through the installed collection.

Workers h1..h3 need not be reachable: every build runs on the build host
(localhost) into the shared project dir, which is also every worker's
``flodl_path``. The controller's identity is pinned with ``FLODL_HOST_NAME``
so a fourth worker, ``h0`` (``flodl_host: ctl``), is the controller's own box
and must be skipped.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import need, run_ansible
from play_output import RECORD_MARK, failed_in_recap, recap, recorded, results, task_results

CARGO = shutil.which("cargo") or "/root/.cargo/bin/cargo"
CONTROLLER = "ctl"

PLAYBOOK = """\
- name: Prebuild, then a stand-in for the launch phase
  hosts: flodl_workers
  gather_facts: false
  any_errors_fatal: true
  tasks:
    - name: Run the phases
      block:
        - name: Prebuild
          ansible.builtin.include_role:
            name: flodl.cluster.prebuild
        # A fact, not a file: each `copy` on localhost costs about 1 CPU-s (a stat and a copy module run).
        - name: Launch stand-in
          ansible.builtin.set_fact:
            launched: true
          run_once: true
      always:
        # Printed, not written: a `copy` on localhost is two module runs (play_output.recorded).
        - name: Record what the role returned
          ansible.builtin.debug:
            msg: >-
              """ + RECORD_MARK + """ {{ {'launched': launched | default(false),
                  'build': flodl_prebuild_run | default(None),
                  'envelope': (flodl_prebuild_run | default({})).envelope | default(None),
                  'envelope_json': (flodl_prebuild_run | default({})).envelope_json | default(None)}
                | to_json | b64encode }}
          run_once: true
"""


@pytest.fixture
def cargo_available() -> None:
    need(Path(CARGO).exists(), f"cargo not found ({CARGO})")


def write_inventory(
    where: Path,
    project: Path,
    workers: list[tuple[str, str | None]],
    *,
    controller_worker: bool = True,
    **cluster_vars: Any,
) -> Path:
    hosts: dict[str, Any] = {}
    if controller_worker:
        # The controller's own box: same logical host as FLODL_HOST_NAME, never prebuilt.
        hosts["h0"] = {
            "flodl_host": CONTROLLER,
            "flodl_path": str(project),
            "flodl_local_devices": [0],
            "flodl_nccl_socket_ifname": "lo",
            "flodl_arch": "precompiled/cpu",
        }
    for name, arch in workers:
        entry: dict[str, Any] = {
            "flodl_path": str(project),
            "flodl_local_devices": [0],
            "flodl_nccl_socket_ifname": "lo",
        }
        if arch is not None:
            entry["flodl_arch"] = arch
        hosts[name] = entry
    inventory = {
        "all": {
            "vars": {
                "flodl_controller_host": "127.0.0.1",
                "flodl_controller_path": str(project),
                "flodl_cmd": "train",
                **cluster_vars,
            },
            "children": {"flodl_workers": {"hosts": hosts}},
        }
    }
    path = where / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[str]):
        self.proc = proc
        self.data = recorded(proc.stdout) or {}
        self.launched = self.data.get("launched") is True  # the play went on past the prebuild role

    @property
    def build(self) -> dict[str, Any]:
        return self.data.get("build") or {}

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr


def run_prebuild(collection, work: Path, inventory: Path, *extra: str) -> Run:
    playbook = work / "play.yml"
    playbook.write_text(PLAYBOOK)
    proc = run_ansible(
        collection,
        ["ansible-playbook", "-i", str(inventory), str(playbook), *extra],
        cwd=work,
        env={"FLODL_HOST_NAME": CONTROLLER},
        timeout=900,
    )
    return Run(proc)


def run_binary(project: Path, bin_rel: str, host: str) -> dict[str, str]:
    proc = subprocess.run(
        [str(project / bin_rel)],
        cwd=str(project),
        env=dict(os.environ, FLODL_HOST_NAME=host, FLODL_DEMO_STEPS="0"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fields = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields.setdefault(key, value)
    return fields


def ts(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


def assert_first_ran_alone(builds: list[dict[str, Any]]) -> None:
    first, rest = builds[0], builds[1:]
    assert rest, "need more than one build to prove ordering"
    first_end = ts(first["ended"])
    for other in rest:
        assert ts(other["started"]) >= first_end, (first, other)


BUILD_TASK = "Prebuild | Build on the build host (docker compose or cargo)"
RESULT_TASK = "Prebuild | Result of this worker"


def build_task_status(output: str) -> str:
    """``ok``/``changed``/``fatal`` as the play output shows the (run-once) build task."""
    found = task_results(output, BUILD_TASK)
    assert len(found) == 1, f"the build step runs once, got {found}"
    return next(iter(found.values()))


FEATURE = {"precompiled/cu128": "cuda", "precompiled/rocm63": "rocm", "precompiled/cpu": "cpu"}


def assert_binaries(project: Path, envelope: dict[str, Any], expected: dict[str, str]) -> None:
    assert sorted(envelope) == sorted(expected)
    for host, arch in expected.items():
        slug = arch.replace("/", "-")
        entry = envelope[host]
        assert entry["bin"] == f"target/cluster/{host}/{slug}/release/train"
        lib = f"{project}/libtorch/{arch}/lib"
        assert entry["ld_library_path"] == (f"/opt/rocm/lib:{lib}" if "rocm" in arch else lib)
        assert "cwd_subpath" not in entry
        fields = run_binary(project, entry["bin"], host)
        assert fields["variant"] == arch, (host, fields)
        assert fields["features"] == FEATURE[arch], (host, fields)


# --------------------------------------------------------------------------
# native
# --------------------------------------------------------------------------


def test_native_three_hosts_two_variants_then_noop(cargo_available, installed_collection, demo_project, tmp_path):
    project = demo_project()
    expected = {"h1": "precompiled/cu128", "h2": "precompiled/rocm63", "h3": "precompiled/cu128"}
    inv = write_inventory(tmp_path, project, list(expected.items()), flodl_prebuild_dedupe=False)
    run = run_prebuild(installed_collection, tmp_path, inv)
    assert run.proc.returncode == 0, run.output
    assert run.launched

    build = run.build
    assert build["mode"] == "native"
    assert [b["host"] for b in build["builds"]] == ["h1", "h2", "h3"]  # h0 is the controller: skipped
    # Each worker reports its own build; h0 (the controller's own box) is skipped.
    assert task_results(run.proc.stdout, RESULT_TASK) == {
        "h0": "skipping", "h1": "changed", "h2": "changed", "h3": "changed"}
    # h0's skips: its report, and the run-once artifact task (the build step returned the artifact itself)
    assert failed_in_recap(run.proc.stdout) == [] and recap(run.proc.stdout)["h0"]["skipped"] == 2
    assert "h0" not in build["hosts"] and CONTROLLER not in build["hosts"]
    assert not (project / "target/cluster/h0").exists()
    assert not (project / f"target/cluster/{CONTROLLER}").exists()
    assert_first_ran_alone(build["builds"])
    # The other two overlapped (parallel).
    b2, b3 = build["builds"][1:]
    assert ts(b2["started"]) < ts(b3["ended"]) and ts(b3["started"]) < ts(b2["ended"])

    for b in build["builds"]:
        host, arch = b["host"], expected[b["host"]]
        slug = arch.replace("/", "-")
        assert b["target_dir"] == f"{project}/target/cluster/{host}/{slug}"
        assert b["cwd"] == str(project)
        feature = FEATURE[arch]
        assert b["command"] == f"cargo build --release --features {feature} --bin train"
        assert b["env"]["LIBTORCH_PATH"] == f"{project}/libtorch/{arch}"
        assert b["env"]["CARGO_TARGET_DIR"] == b["target_dir"]
        assert b["status"] == "built" and b["rc"] == 0 and b["changed"] is True
        assert Path(b["log"]).is_file() and Path(b["log"]).parent == Path(b["target_dir"])
    assert build["builds"][0]["env"]["CUDA_VERSION"] == "12.8.0"
    assert build["builds"][0]["env"]["CUDA_TAG"] == "12.8"
    assert "CUDA_VERSION" not in build["builds"][1]["env"]

    assert_binaries(project, run.data["envelope"], expected)
    lib = f"{project}/libtorch/precompiled"
    expected_json = (
        f'{{"h1":{{"bin":"target/cluster/h1/precompiled-cu128/release/train","ld_library_path":"{lib}/cu128/lib"}},'
        f'"h2":{{"bin":"target/cluster/h2/precompiled-rocm63/release/train",'
        f'"ld_library_path":"/opt/rocm/lib:{lib}/rocm63/lib"}},'
        f'"h3":{{"bin":"target/cluster/h3/precompiled-cu128/release/train","ld_library_path":"{lib}/cu128/lib"}}}}'
    )
    assert run.data["envelope_json"] == expected_json
    assert (project / "target/cluster/prebuild-envelope.json").read_text() == expected_json
    assert build_task_status(run.proc.stdout) == "changed"

    # Nothing changed: ok, not changed, and no binary touched.
    before = {h: (project / run.data["envelope"][h]["bin"]).stat().st_mtime_ns for h in expected}
    again = run_prebuild(installed_collection, tmp_path, inv)
    assert again.proc.returncode == 0, again.output
    assert again.build["changed"] is False
    assert [b["status"] for b in again.build["builds"]] == ["up to date"] * 3
    assert build_task_status(again.proc.stdout) == "ok"
    assert task_results(again.proc.stdout, RESULT_TASK) == {"h0": "skipping", "h1": "ok", "h2": "ok", "h3": "ok"}
    assert {h: (project / run.data["envelope"][h]["bin"]).stat().st_mtime_ns for h in expected} == before
    assert again.data["envelope_json"] == expected_json
    print("native cold seconds:", [b["seconds"] for b in build["builds"]])
    print("native no-op seconds:", [b["seconds"] for b in again.build["builds"]])


def test_native_dedupe_one_build_for_three_hosts(cargo_available, installed_collection, demo_project, tmp_path):
    project = demo_project()
    expected = {"h1": "precompiled/rocm63", "h2": "precompiled/rocm63", "h3": "precompiled/rocm63"}
    inv = write_inventory(tmp_path, project, list(expected.items()))
    run = run_prebuild(installed_collection, tmp_path, inv)
    assert run.proc.returncode == 0, run.output
    build = run.build
    assert len(build["builds"]) == 1
    assert build["groups"] == [{"arch": "precompiled/rocm63", "built_by": "h1", "hosts": ["h1", "h2", "h3"]}]
    assert "1 build(s), dedupe on" in run.proc.stdout
    assert "linked from the build of h1" in run.proc.stdout
    assert [build["hosts"][h]["status"] for h in ("h1", "h2", "h3")] == ["built", "linked", "linked"]
    assert_binaries(project, run.data["envelope"], expected)
    inodes = {(project / run.data["envelope"][h]["bin"]).stat().st_ino for h in expected}
    assert len(inodes) == 1  # hard links of the one binary
    assert not (project / "target/cluster/h2/precompiled-rocm63/prebuild.log").exists()

    # Re-run: nothing to do, links already current.
    again = run_prebuild(installed_collection, tmp_path, inv)
    assert again.proc.returncode == 0, again.output
    assert again.build["changed"] is False and build_task_status(again.proc.stdout) == "ok"

    # A source change rebuilds once and refreshes every host's link.
    main_rs = project / "src/main.rs"
    main_rs.write_text(main_rs.read_text() + "\n// touched\n")
    changed = run_prebuild(installed_collection, tmp_path, inv)
    assert changed.proc.returncode == 0, changed.output
    assert all(changed.build["hosts"][h]["changed"] for h in expected)
    assert len({(project / changed.data["envelope"][h]["bin"]).stat().st_ino for h in expected}) == 1

    # Dedupe off: one build per host, each in its own target dir; first one alone.
    inv = write_inventory(tmp_path, project, list(expected.items()), flodl_prebuild_dedupe=False)
    off = run_prebuild(installed_collection, tmp_path, inv)
    assert off.proc.returncode == 0, off.output
    assert [b["host"] for b in off.build["builds"]] == ["h1", "h2", "h3"]
    assert "3 build(s), dedupe off" in off.proc.stdout
    # h1's binary is already there (the dedupe runs built it), so the cargo registry is warm: no build needs to
    # run alone first (a cold tree's first-alone order is proven above and below). h1's is a no-op that ends
    # within a fraction of a second, so a loaded machine may start a thread after it: what shows the order is that
    # the two real builds overlap and do not both wait for h1's end.
    starts = [ts(b["started"]) for b in off.build["builds"]]
    ends = [ts(b["ended"]) for b in off.build["builds"]]
    assert max(starts[1:]) < min(ends[1:]) and min(starts[1:]) < ends[0], off.build["builds"]
    for h in expected:
        assert (project / f"target/cluster/{h}/precompiled-rocm63/prebuild.log").is_file()
    assert_binaries(project, off.data["envelope"], expected)


def _break_rocm(project: Path) -> None:
    """The copy (never the demo itself) stops compiling with the rocm feature."""
    main_rs = project / "src/main.rs"
    main_rs.write_text(
        main_rs.read_text()
        + '\n#[cfg(feature = "rocm")]\ncompile_error!("flodl-demo test copy: rocm build broken on purpose");\n'
    )


def test_native_failures_are_reported_together(cargo_available, installed_collection, demo_project, tmp_path):
    project = demo_project()
    _break_rocm(project)
    # Leave a stale envelope behind: a failed run must remove it.
    stale = project / "target/cluster/prebuild-envelope.json"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"old":{}}')
    workers = [("h1", "precompiled/rocm63"), ("h2", "precompiled/cu128"), ("h3", "precompiled/cu999")]
    inv = write_inventory(tmp_path, project, workers, flodl_prebuild_dedupe=False)
    run = run_prebuild(installed_collection, tmp_path, inv)
    assert run.proc.returncode != 0
    assert not run.launched
    assert run.data["envelope"] is None and run.data["envelope_json"] is None
    assert not stale.exists()

    build = run.build
    # One fatal line per failing worker, each with its own build's problem; h2 built fine.
    fails = {h: str(r["msg"]) for h, r in results(run.proc.stdout).items()}
    assert sorted(fails) == ["h1", "h3"], fails
    assert "precompiled/rocm63" in fails["h1"] and "cargo build --release --features rocm --bin train" in fails["h1"]
    assert "rocm build broken on purpose" in fails["h1"]
    assert "precompiled/cu999" in fails["h3"]
    # As words: the random temporary project path may hold "h1" (e.g. ".../together-s211h1jx/demo").
    assert not re.search(r"\bh3\b", fails["h1"]) and not re.search(r"\bh1\b", fails["h3"])
    assert failed_in_recap(run.proc.stdout) == ["h1", "h3"]
    assert task_results(run.proc.stdout, RESULT_TASK)["h2"] == "changed"
    assert task_results(run.proc.stdout, RESULT_TASK)["h0"] == "skipping"
    # The build step itself is not a failure; the registered result still carries the whole story.
    assert build_task_status(run.proc.stdout) == "changed"
    assert build["builds_failed"] is True
    msg = build["msg"]
    assert msg.startswith("flodl prebuild failed on 2 host(s): h1, h3 (1 other build(s) completed)"), msg
    assert build["failed_hosts"] == ["h1", "h3"]
    assert "- host h1, variant precompiled/rocm63: build exited with status 101" in msg
    assert "    command: cargo build --release --features rocm --bin train" in msg
    assert f"    full log: {project}/target/cluster/h1/precompiled-rocm63/prebuild.log" in msg
    assert "rocm build broken on purpose" in msg  # tail of the compiler output
    assert (
        f"- host h3, variant precompiled/cu999: libtorch variant not found on the build host: "
        f"{project}/libtorch/precompiled/cu999/lib is not a directory"
    ) in msg
    assert "h2" not in build["failed_hosts"]
    # The failing first build did not stop the other one, which completed.
    assert build["hosts"]["h2"]["status"] == "built"
    assert run_binary(project, "target/cluster/h2/precompiled-cu128/release/train", "h2")["variant"] == (
        "precompiled/cu128"
    )
    assert [b["host"] for b in build["builds"]] == ["h1", "h2", "h3"]
    assert build["builds"][2]["status"] == "not run"
    full_log = Path(build["hosts"]["h1"]["log"]).read_text()
    assert "rocm build broken on purpose" in full_log and "# command: cargo build" in full_log
    # The operator sees the same message in the play output.
    assert "host h3, variant precompiled/cu999" in run.proc.stdout
    assert "Launch stand-in" not in run.proc.stdout
    # h3's own failure says why (its build never ran: the variant is missing on the build host).
    assert f"libtorch variant not found on the build host: {project}/libtorch/precompiled/cu999/lib" in fails["h3"], (
        fails["h3"])


def test_check_mode_builds_nothing_and_shows_the_plan(cargo_available, installed_collection, demo_project, tmp_path):
    project = demo_project()
    workers = [("h1", "precompiled/cu128"), ("h2", "precompiled/rocm63"), ("h3", "precompiled/cu128")]
    inv = write_inventory(tmp_path, project, workers, flodl_cmd_dir="")
    run = run_prebuild(installed_collection, tmp_path, inv, "--check")
    assert run.proc.returncode == 0, run.output
    assert not (project / "target").exists()
    build = run.build
    assert build["changed"] is False
    assert build["groups"] == [
        {"arch": "precompiled/cu128", "built_by": "h1", "hosts": ["h1", "h3"]},
        {"arch": "precompiled/rocm63", "built_by": "h2", "hosts": ["h2"]},
    ]
    h1 = build["hosts"]["h1"]
    assert h1["status"] == "would build"
    assert h1["command"] == "cargo build --release --features cuda --bin train"
    assert h1["target_dir"] == f"{project}/target/cluster/h1/precompiled-cu128"
    assert h1["env"] == {
        "CARGO_TARGET_DIR": f"{project}/target/cluster/h1/precompiled-cu128",
        "CUDA_TAG": "12.8",
        "CUDA_VERSION": "12.8.0",
        "LIBTORCH_PATH": f"{project}/libtorch/precompiled/cu128",
    }
    assert build["hosts"]["h3"]["status"] == "would link"
    assert "would run in" in run.proc.stdout and "cargo build --release --features rocm --bin train" in run.proc.stdout
    # The planned envelope is available to the launch phase's check mode.
    assert sorted(run.data["envelope"]) == ["h1", "h2", "h3"]
    assert task_results(run.proc.stdout, RESULT_TASK) == {"h0": "skipping", "h1": "ok", "h2": "ok", "h3": "ok"}


def test_missing_arch_fails_before_any_build(installed_collection, demo_project, tmp_path):
    project = demo_project()
    inv = write_inventory(tmp_path, project, [("h1", "precompiled/cu128"), ("h2", None)])
    run = run_prebuild(installed_collection, tmp_path, inv)
    assert run.proc.returncode != 0
    # Refused before any build: the worker with the problem fails in its own report (not the worker the run-once
    # step ran on), the others are skipped; nothing is launched.
    fails = results(run.proc.stdout)
    assert sorted(fails) == ["h2"], fails
    msg = str(fails["h2"]["msg"])
    assert "no host was contacted" in msg and "h2" in msg and "flodl_arch" in msg
    assert run.build["refused"] is True and "builds" not in run.build and "hosts" not in run.build
    assert task_results(run.proc.stdout, RESULT_TASK) == {"h0": "skipping", "h1": "skipping", "h2": "fatal"}
    assert failed_in_recap(run.proc.stdout) == ["h2"] and not run.launched
    assert not (project / "target").exists()


def test_prebuild_disabled_skips_everything(installed_collection, demo_project, tmp_path):
    project = demo_project()
    inv = write_inventory(tmp_path, project, [("h1", None)], flodl_prebuild=False)
    run = run_prebuild(installed_collection, tmp_path, inv)
    assert run.proc.returncode == 0, run.output
    assert run.launched and run.build.get("skipped") is True
    assert "builds" not in run.build and run.data["envelope"] == {} and run.data["envelope_json"] == ""
    assert task_results(run.proc.stdout, RESULT_TASK) == {"h0": "skipping", "h1": "skipping"}
    assert not (project / "target").exists()


def test_collection_playbook_writes_envelope_file(cargo_available, installed_collection, demo_project, tmp_path):
    project = demo_project()
    inv = write_inventory(tmp_path, project, [("h1", "precompiled/cpu")], flodl_cmd_dir="")
    proc = run_ansible(
        installed_collection,
        ["ansible-playbook", "-i", str(inv), "flodl.cluster.prebuild"],
        cwd=tmp_path,
        env={"FLODL_HOST_NAME": CONTROLLER},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    envelope = json.loads((project / "target/cluster/prebuild-envelope.json").read_text())
    assert envelope == {
        "h1": {
            "bin": "target/cluster/h1/precompiled-cpu/release/train",
            "ld_library_path": f"{project}/libtorch/precompiled/cpu/lib",
        }
    }
    assert run_binary(project, envelope["h1"]["bin"], "h1")["features"] == "cpu"


# --------------------------------------------------------------------------
# docker compose
# --------------------------------------------------------------------------


def test_docker_three_hosts_two_variants_then_noop(docker_engine, installed_collection, demo_project, tmp_path):
    project = demo_project()
    expected = {"h1": "precompiled/cu128", "h2": "precompiled/rocm63", "h3": "precompiled/cu128"}
    inv = write_inventory(
        tmp_path, project, list(expected.items()), flodl_controller_docker="dev", flodl_prebuild_dedupe=False
    )
    run = run_prebuild(installed_collection, tmp_path, inv)
    assert run.proc.returncode == 0, run.output
    build = run.build
    assert build["mode"] == "docker"
    assert [b["host"] for b in build["builds"]] == ["h1", "h2", "h3"]
    assert_first_ran_alone(build["builds"])
    for b in build["builds"]:
        host, arch = b["host"], expected[b["host"]]
        slug = arch.replace("/", "-")
        assert b["cwd"] == str(project)
        assert b["command"] == (
            f"docker compose run --rm dev bash -c 'cd /workspace && "
            f"CARGO_TARGET_DIR=/workspace/target/cluster/{host}/{slug} cargo build --release "
            f"--features {FEATURE[arch]} --bin train'"
        )
        assert b["env"]["LIBTORCH_HOST_PATH"] == f"{project}/libtorch/{arch}"
        assert b["env"]["LIBTORCH_CPU_PATH"] == "./libtorch/precompiled/cpu"
        assert b["status"] == "built", b
    assert build["builds"][0]["env"]["CUDA_VERSION"] == "12.8.0"
    assert_binaries(project, run.data["envelope"], expected)

    again = run_prebuild(installed_collection, tmp_path, inv)
    assert again.proc.returncode == 0, again.output
    assert again.build["changed"] is False and build_task_status(again.proc.stdout) == "ok"
    assert task_results(again.proc.stdout, RESULT_TASK) == {"h0": "skipping", "h1": "ok", "h2": "ok", "h3": "ok"}
    print("docker cold seconds:", [b["seconds"] for b in build["builds"]])
    print("docker no-op seconds:", [b["seconds"] for b in again.build["builds"]])


def test_docker_dedupe_and_failures(docker_engine, installed_collection, demo_project, tmp_path):
    project = demo_project()
    _break_rocm(project)
    workers = [
        ("h1", "precompiled/cu128"),
        ("h2", "precompiled/cu128"),
        ("h3", "precompiled/rocm63"),
        ("h4", "precompiled/cu999"),
    ]
    inv = write_inventory(tmp_path, project, workers, flodl_controller_docker="cuda", flodl_cmd_dir="")
    run = run_prebuild(installed_collection, tmp_path, inv)
    assert run.proc.returncode != 0 and not run.launched
    build = run.build
    fails = {h: str(r["msg"]) for h, r in results(run.proc.stdout).items()}
    assert sorted(fails) == ["h3", "h4"], fails
    assert "rocm build broken on purpose" in fails["h3"] and "precompiled/cu999" in fails["h4"], fails
    assert failed_in_recap(run.proc.stdout) == ["h3", "h4"]
    assert build["failed_hosts"] == ["h3", "h4"]
    assert [b["host"] for b in build["builds"]] == ["h1", "h3", "h4"]
    assert_first_ran_alone(build["builds"][:2])
    msg = build["msg"]
    assert "- host h3, variant precompiled/rocm63: build exited with status 101" in msg
    assert "docker compose run --rm cuda bash -c" in msg and "rocm build broken on purpose" in msg
    assert "- host h4, variant precompiled/cu999: libtorch variant not found" in msg
    for host in ("h1", "h2"):
        fields = run_binary(project, f"target/cluster/{host}/precompiled-cu128/release/train", host)
        assert fields["variant"] == "precompiled/cu128" and fields["features"] == "cuda"
    assert build["hosts"]["h2"]["status"] == "linked"
    # h4's own failure says why (its build never ran: the variant is missing on the build host).
    assert "libtorch variant not found" in fails["h4"], fails["h4"]


def test_controller_only_cluster_builds_nothing(installed_collection, demo_project, tmp_path):
    """Every worker is the controller's own box: no build, an empty envelope, the variable left unset."""
    project = demo_project()
    stale = project / "target/cluster/prebuild-envelope.json"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"old":{}}')
    inv = write_inventory(tmp_path, project, [])
    run = run_prebuild(installed_collection, tmp_path, inv)
    assert run.proc.returncode == 0, run.output
    assert run.launched
    assert task_results(run.proc.stdout, RESULT_TASK) == {"h0": "skipping"}
    assert run.build["builds"] == [] and run.build["changed"] is True  # the stale file was removed
    assert run.data["envelope"] == {} and run.data["envelope_json"] == ""
    assert not stale.exists()
    assert not (project / "target/cluster/ctl").exists()
