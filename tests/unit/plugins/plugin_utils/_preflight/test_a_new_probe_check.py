"""Issue 36's worked example, proved: a threshold-style check defined here alone, added to the registry, is run,
parsed and judged by every host's probe (workers, launch host, controller, build host) with no product change."""
from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote
from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_verdict as pv
from ansible_collections.flodl.cluster.plugins.module_utils._probe import check_registry as reg
from ansible_collections.flodl.cluster.plugins.module_utils._probe import launch_host as lh
from ansible_collections.flodl.cluster.plugins.module_utils._probe import preflight_probe as pp
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import (
    DATA_PATH, ERROR, TARGET_DIR, Armed, Ask, Finding, ProbeCheck)
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RunSettings
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import launch_host as lhio
from ansible_collections.flodl.cluster.plugins.plugin_utils._preflight import preflight_sweep as sweep
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext

KNOB = "flodl_preflight_min_entries"  # a stand-in knob: in the product it would be a line of knobs.NUMBERS
MARK = "__FLODL_TEST_ENTRIES__"


@dataclass(frozen=True)
class Entries:
    count: int | None
    path: str


def _part(paths: Sequence[str]) -> str:
    candidates = " ".join(posix_quote(p) for p in paths)
    return (f'd=; for c in {candidates}; do if [ -d "$c" ]; then d=$c; break; fi; done; '
            f'if [ -n "$d" ]; then echo "{MARK}=$(ls -A -- "$d" | wc -l | tr -d " ") $d"; else echo "{MARK}="; fi')


def _parse(text: str) -> Entries:
    count, _sep, path = text.partition(" ")
    return Entries(int(count) if count.isdigit() else None, path)


def _judge(host: str, found: Entries | None, least: float, place: str) -> Finding | None:
    if found is None or found.count is None or found.count >= least:
        return None
    return Finding(ERROR, "entries", f"{host}: only {found.count} entries in {place} {found.path}, below {KNOB} "
                   f"({least:g}); fix: add some, or lower {KNOB}.")


def _shown(found: Entries | None) -> Mapping[str, Any]:
    return {"entries": found.count} if found is not None else {}


ENTRIES: ProbeCheck[Entries] = ProbeCheck(name="entries", knob=KNOB, mark=MARK, places=frozenset((DATA_PATH, TARGET_DIR)),
                                          what="entry count", part=_part, parse=_parse, judge=_judge, shown=_shown)
SETTINGS = RunSettings(preflight_numbers=((KNOB, 3.0),))  # as read_settings fills it from knobs.NUMBERS


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    monkeypatch.setattr(reg, "CHECKS", (*reg.CHECKS, ENTRIES))  # the one line a new check adds to the registry


def _sh(script: str) -> str:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, timeout=30).stdout


def _ctx(root: str, data: str, prebuild: bool = False) -> RunContext:
    cluster = cluster_model({"controller": {"host": "10.0.0.1", "path": root, "data_path": data}, "workers": []})
    return RunContext(cluster=cluster, controller_identity="ctl", prebuild=prebuild, net_timeout_scale=None,
                      cmd="train", cmd_dir="", fdl_env=None, build_host="localhost", launch_command=None,
                      project_dir=root, settings=SETTINGS)


def test_its_knob_arms_it_and_only_it() -> None:
    assert reg.armed(SETTINGS, DATA_PATH) == (Armed(ENTRIES, 3.0),) == reg.armed(SETTINGS, TARGET_DIR)
    assert reg.armed(RunSettings(), DATA_PATH) == ()
    assert reg.unanswered(reg.armed(SETTINGS, TARGET_DIR)) == f"entry count was not checked ({KNOB})"


def test_a_worker_runs_its_part_and_its_verdict_calls_its_judge(tmp_path) -> None:
    (tmp_path / "one").touch()
    checks = reg.armed(SETTINGS, DATA_PATH)
    stdout = _sh(pp.probe_script(Ask(data_path=str(tmp_path)), checks))
    assert pp.parse_probe(stdout).answers == {"entries": Entries(1, str(tmp_path))}
    worker = cluster_model({"controller": {"host": "c", "path": "/p"},
                            "workers": [{"host": "h2", "path": "/p", "local_devices": [0]}]}).workers[0]
    report = pv.evaluate_remote(worker, data_path=str(tmp_path), declared=True, prebuild=False, build_arch=None,
                                returncode=0, stdout=stdout, checks=checks)
    assert report["status"] == "error" and report["data_path"]["entries"] == 1
    assert report["errors"] == [f"h2: only 1 entries in data_path {tmp_path}, below {KNOB} (3); fix: add some, "
                                f"or lower {KNOB}."]


def test_the_launch_hosts_session_runs_it_and_the_controller_report_judges_it(tmp_path) -> None:
    ctx = _ctx(str(tmp_path), str(tmp_path))
    script = lh.session_script(str(tmp_path), data_path=str(tmp_path), reach=None, gpus=False, run_id=None,
                               checks=reg.armed(SETTINGS, DATA_PATH))
    facts = lh.parse_session(_sh(script))
    assert facts.complete and facts.answers == {"entries": Entries(0, str(tmp_path))}
    report = sweep.controller_report(ctx, lhio.SessionResult("lh", facts, {}, [], [], False))
    assert report["status"] == "error" and report["errors"][0].startswith(f"{facts.identity}: only 0 entries")


def test_the_controller_here_and_the_build_host_run_it_in_the_sweep(tmp_path) -> None:
    data, root = tmp_path / "data", tmp_path / "proj"
    (root / "target").mkdir(parents=True)
    data.mkdir()
    found = sweep.sweep(_ctx(str(root), str(data), prebuild=True), build_arch="x86_64", build_host_argv=None,
                        timeout=5, max_parallel=1)
    controller = found["controller"]
    assert controller["status"] == "error" and controller["data_path"]["entries"] == 0
    assert controller["errors"] == [
        f"ctl: only 0 entries in data_path {data}, below {KNOB} (3); fix: add some, or lower {KNOB}.",
        f"build host localhost: only 0 entries in target_dir {root / 'target'}, below {KNOB} (3); fix: add some, "
        f"or lower {KNOB}."]


def test_a_remote_build_host_is_asked_in_its_arch_probe(tmp_path) -> None:
    ctx = _ctx(str(tmp_path), str(tmp_path), prebuild=True)
    checks = reg.armed(ctx.settings, TARGET_DIR)
    said = pp.parse_probe(_sh(pp.probe_script(Ask(arch=True), checks, sweep.target_dirs(ctx))))
    assert said.uname and said.answers == {"entries": Entries(0, str(tmp_path))}
    off = replace(ctx, settings=RunSettings())
    assert MARK not in pp.probe_script(Ask(arch=True), reg.armed(off.settings, TARGET_DIR), sweep.target_dirs(off))
