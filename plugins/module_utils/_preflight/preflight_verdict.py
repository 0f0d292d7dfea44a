# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's verdict of one host: its probe's outcome (or the controller's local checks) as one report.

A report is a dict: ``host``, ``status`` (ok, warning, error, unreachable), what was read
(arch, libc, pkill, gpus, data path state) and the ``errors``/``warnings``/``notes`` messages.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._preflight.preflight_findings import (
    ERROR,
    WARNING,
    Finding,
    check_gpus,
    host_key_finding,
    unreachable_finding,
)
# The registry's parts are judged where they are defined (module_utils._probe.check_registry.PARTS).
from ansible_collections.flodl.cluster.plugins.module_utils._probe.abi import check_abi
from ansible_collections.flodl.cluster.plugins.module_utils._probe.data_path import check_data_path
from ansible_collections.flodl.cluster.plugins.module_utils._probe.pkill import check_pkill
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import NOTE
from ansible_collections.flodl.cluster.plugins.module_utils._probe.project_checkout import check_project_path
from ansible_collections.flodl.cluster.plugins.module_utils._probe.preflight_probe import (  # noqa: F401 (the statuses: this module's vocabulary)
    STATUS_ERROR, STATUS_OK, STATUS_UNREACHABLE, STATUS_WARNING, ProbeOutput, last_line, parse_probe, restatus)
from ansible_collections.flodl.cluster.plugins.module_utils._probe import check_registry
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import DATA_PATH, Armed
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import host_key_failure
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Worker

_GLIBC_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)\s*$")


def libc_label(ldd: str | None) -> str | None:
    """Short libc name for summaries: ``glibc 2.36``, ``musl``, or the raw first line."""
    if not ldd:
        return None
    line = ldd.strip().splitlines()[0].strip()
    lowered = line.lower()
    if "musl" in lowered:
        return "musl"
    if "glibc" in lowered or "gnu libc" in lowered:
        match = _GLIBC_VERSION.search(line)
        return f"glibc {match.group(1)}" if match else "glibc"
    return line[:60]


def _status(findings: Sequence[Finding], reached: bool = True) -> str:
    if any(f.level == ERROR for f in findings):
        return STATUS_ERROR
    if not reached:
        return STATUS_UNREACHABLE
    if any(f.level == WARNING for f in findings):
        return STATUS_WARNING
    return STATUS_OK


# A finding's level -> the report list that carries its message.
_LISTS = {ERROR: "errors", WARNING: "warnings", NOTE: "notes"}


def _report(host: str, findings: Sequence[Finding], **fields: Any) -> dict[str, Any]:
    report: dict[str, Any] = {"host": host}
    report.update(fields)
    report.update({key: [f.message for f in findings if f.level == level] for level, key in _LISTS.items()})
    return report


def _data_path_state(is_dir: bool | None, readable: bool | None) -> str:
    if is_dir is None:
        return "unknown"
    if not is_dir:
        return "missing"
    return "ok" if readable else "unreadable"


def _data_path(path: str, declared: bool, state: str, answers: Mapping[str, Any],
               checks: Sequence[Armed]) -> dict[str, Any]:
    out: dict[str, Any] = {"path": path, "declared": declared, "state": state}
    out.update(check_registry.shown(answers, checks))
    return out


def _data_path_findings(host: str, path: str, declared: bool, is_dir: bool, readable: bool,
                        answers: Mapping[str, Any], checks: Sequence[Armed]) -> list[Finding]:
    """The data path's own check, then each armed probe check's judgement of it."""
    found = check_data_path(host, path, declared, is_dir, readable)
    return [*([found] if found else []), *check_registry.findings(host, answers, checks, DATA_PATH)]


def controller_report(host: str, path: str, declared: bool, is_dir: bool, readable: bool,
                      answers: Mapping[str, Any] | None = None, checks: Sequence[Armed] = ()) -> dict[str, Any]:
    """The controller's data-path checks, run where the launch runs (this machine or the launch host).

    ``answers``: the probe checks' answers there (``parse_probe``); ``checks``: the armed ones of the data path.
    """
    answers = answers or {}
    findings = _data_path_findings(host, path, declared, is_dir, readable, answers, checks)
    return _report(
        host,
        findings,
        role="controller",
        status=_status(findings),
        data_path=_data_path(path, declared, _data_path_state(is_dir, readable), answers, checks),
    )


def add_findings(report: dict[str, Any], findings: Sequence[Finding]) -> None:
    """Findings about another host added to ``report`` (the build host's to the controller's), its status with them."""
    for finding in findings:
        report[_LISTS[finding.level]].append(finding.message)
    restatus(report)


def evaluate_remote(
    worker: Worker,
    *,
    data_path: str,
    declared: bool,
    prebuild: bool,
    build_arch: str | None,
    returncode: int | None,
    stdout: str,
    stderr: str = "",
    error: str | None = None,
    require_reached: bool = False,
    checks: Sequence[Armed] = (),
    probe: ProbeOutput | None = None,
) -> dict[str, Any]:
    """One worker's verdict from its probe's outcome; ``require_reached``: a probe that could not run fails it.

    ``checks``: the armed probe checks of the data path (module_utils._probe.check_registry.armed). ``probe``:
    ``stdout`` already parsed (``parse_probe``), when the caller needed it too.
    """
    host = worker.host
    wants_gpus = worker.all_devices
    base: dict[str, Any] = {
        "arch": None,
        "libc": None,
        "ldd": None,
        "pkill": None,
        "gpus": None,
        "data_path": {"path": data_path, "declared": declared, "state": "unknown"},
    }
    probe = probe if probe is not None else parse_probe(stdout or "")
    key_failure = host_key_failure(stderr) if returncode == 255 and not error else None
    if key_failure is not None:
        findings = [host_key_finding(worker, key_failure)]
        return _report(host, findings, status=_status(findings), **base)
    why = None
    if error:
        why = error
    elif returncode == 255:
        why = "ssh failed: " + (last_line(stderr) or "exit 255")
    elif returncode != 0:
        why = f"the probe exited {returncode}: " + (last_line(stderr) or "no error output")
    elif not probe.complete or probe.dir_ok is None or probe.read_ok is None:
        why = "its output was incomplete: " + (last_line(stderr) or last_line(stdout) or "nothing printed")
    if why is not None:
        findings = [unreachable_finding(host, why, require_reached)]
        reached = returncode not in (None, 255) and not error
        return _report(host, findings, status=_status(findings, reached=reached), **base)

    is_dir, readable = bool(probe.dir_ok), bool(probe.read_ok)
    base["data_path"] = _data_path(data_path, declared, _data_path_state(is_dir, readable), probe.answers, checks)
    findings = _data_path_findings(host, data_path, declared, is_dir, readable, probe.answers, checks)
    finding = check_project_path(host, worker.path, probe.project)
    if finding:
        findings.append(finding)
    if prebuild:
        base["arch"] = probe.uname or None
        base["ldd"] = probe.ldd or None
        base["libc"] = libc_label(probe.ldd)
        base["pkill"] = probe.pkill or None
        if build_arch:
            finding = check_abi(host, build_arch, probe.uname or "", probe.ldd or "")
        else:
            finding = _musl_only(host, probe.uname or "", probe.ldd or "")
        if finding:
            findings.append(finding)
        finding = check_pkill(host, probe.pkill)
        if finding:
            findings.append(finding)
    if wants_gpus:
        gpus, finding = check_gpus(worker, probe.gpus)
        base["gpus"] = gpus
        if finding:
            findings.append(finding)
    return _report(host, findings, status=_status(findings), **base)


def _musl_only(host: str, remote_uname: str, remote_ldd: str) -> Finding | None:
    """ABI check when the build host's arch is unknown: arch is not compared (warned once, for the
    build host), libc still counts."""
    arch = (remote_uname or "").strip() or "unknown"
    finding = check_abi(host, arch, arch, remote_ldd)
    return finding if finding and finding.level == ERROR else None


def skipped_probe_note(connection: str) -> str:
    """Why a walk_in worker reached by a non-ssh Ansible connection has no ssh probe."""
    return (f"skipped: reached by Ansible's {connection} connection, not ssh; checked by its agent's start "
            "(its data path, ABI and running ranks are not probed before the launch)")


def ansible_worker_report(worker: Worker, connection: str, data_path: str, declared: bool) -> dict[str, Any]:
    """A walk_in worker flodl's ssh cannot reach (``ansible_connection`` not ssh): not probed, ok, said so.

    Its agent starts over that connection and fails its own task when the worker cannot run its rank, so the
    probe is skipped, not failed (``flodl_preflight_require_all`` does not apply: nothing was unreachable).
    """
    note = f"host {worker.host}: preflight probe {skipped_probe_note(connection)}"
    return {"host": worker.host, "status": STATUS_OK, "probe_skipped": connection, "arch": None,
            "libc": None, "ldd": None, "pkill": None, "gpus": None,
            "data_path": {"path": data_path, "declared": declared, "state": "unchecked"},
            "errors": [], "warnings": [], "notes": [note]}


def local_worker_report(
    worker: Worker, controller: Mapping[str, Any], arch: str, gpu_text: str | None
) -> dict[str, Any]:
    """The controller's own worker entry: covered by the controller's checks, no ssh.

    ``gpu_text`` is the local GPU count output, for a ``local_devices: all`` worker.
    """
    report: dict[str, Any] = {
        "host": worker.host,
        "controller": True,
        "status": controller["status"],
        "arch": arch,
        "libc": None,
        "ldd": None,
        "pkill": None,
        "gpus": None,
        "data_path": dict(controller["data_path"]),
        "errors": list(controller.get("errors") or []),
        "warnings": [],
        "notes": [],
    }
    if worker.all_devices:
        gpus, finding = check_gpus(worker, gpu_text)
        report["gpus"] = gpus
        if finding:
            report["errors"].append(finding.message)
            restatus(report)
    return report
