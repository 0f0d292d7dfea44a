# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's report of the whole run: one summary line per host (problems first), the glibc
advisory, the one failure text, and the step's result.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts
from ansible_collections.flodl.cluster.plugins.module_utils._core.fold import Row, fold
from ansible_collections.flodl.cluster.plugins.module_utils._preflight.preflight_findings import ERROR
from ansible_collections.flodl.cluster.plugins.module_utils._probe.preflight_probe import STATUS_ERROR, STATUS_OK, STATUS_UNREACHABLE, STATUS_WARNING


def summary_line(report: Mapping[str, Any]) -> str:
    """``h1: ok — x86_64, glibc 2.36, data /flodl/data ok, gpus 2 nvidia / 0 amd``."""
    label, state = _summary_parts(report)
    return f"{label}: {state}"


def summary_row(report: Mapping[str, Any]) -> Row:
    """The host's summary line, and its state without the host's name (what healthy hosts fold by)."""
    label, state = _summary_parts(report)
    return Row(host=label, line=f"{label}: {state}", state=state,
               problem=report.get("status") != STATUS_OK or report.get("role") == "controller"
               or bool(report.get("probe_skipped")))


def _summary_parts(report: Mapping[str, Any]) -> tuple[str, str]:
    parts: list[str] = []
    label = str(report["host"])
    if report.get("role") == "controller":
        label = f"controller {label}"
        parts.append("local checks")
    elif report.get("controller"):
        parts.append("the controller's own box, no ssh")
    elif report.get("probe_skipped"):
        parts.append(f"probe skipped: reached by Ansible's {report['probe_skipped']} connection, not ssh; "
                     "checked by its agent's start")
    if report.get("arch"):
        parts.append(str(report["arch"]))
    if report.get("libc"):
        parts.append(str(report["libc"]))
    dp = report.get("data_path") or {}
    if dp:
        parts.append(f"data {dp.get('path')} {dp.get('state')}")
    if report.get("pkill") == "absent":
        parts.append("no pkill")
    gpus = GpuCounts.from_dict(report.get("gpus"))
    if gpus is not None:
        parts.append(f"gpus {gpus.nvidia} nvidia / {gpus.amd} amd")
    detail = ", ".join(parts)
    return label, f"{report['status']}" + (f" — {detail}" if detail else "")


# Order of the one line per host: what needs the operator first.
_STATUS_ORDER = {STATUS_ERROR: 0, STATUS_UNREACHABLE: 1, STATUS_WARNING: 2, STATUS_OK: 3}


def problems_first(reports: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Errors, then unreachable hosts, then warnings, then the rest; each group in its own order."""
    return sorted(reports, key=lambda r: _STATUS_ORDER.get(str(r.get("status")), 0))


def host_problem_line(report: Mapping[str, Any], level: str = ERROR) -> str | None:
    """All of one host's errors (or warnings) as one line."""
    messages = report.get("errors" if level == ERROR else "warnings") or []
    if not messages:
        return None
    return " | ".join(messages)


def failure_message(reports: Sequence[Mapping[str, Any]], warnings: Sequence[str]) -> str:
    """The single failure: one line per failing host, then the warnings."""
    lines = [line for line in (host_problem_line(r) for r in reports) if line]
    text = (
        f"flodl preflight failed on {len(lines)} host(s); nothing was built or launched:\n  "
        + "\n  ".join(lines)
    )
    if warnings:
        text += "\nwarnings (not fatal):\n  " + "\n  ".join(warnings)
    return text


def glibc_advisory(reports: Sequence[Mapping[str, Any]]) -> str | None:
    """One advisory line for every glibc banner seen (instead of one note per host)."""
    by_version: dict[str, list[str]] = {}
    for r in reports:
        libc = str(r.get("libc") or "")
        if libc.startswith("glibc"):
            by_version.setdefault(libc, []).append(str(r["host"]))
    if not by_version:
        return None
    seen = "; ".join(f"{libc} on {', '.join(hosts)}" for libc, hosts in by_version.items())
    return (
        f"glibc advisory: {seen}. If a run fails with `GLIBC_x.yy not found`, that worker's glibc is "
        "older than the build host's: build on the host with the oldest glibc."
    )


def collect(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Failed hosts, warnings and advisory notes across every report, in report order."""
    failed = [str(r["host"]) for r in reports if r.get("errors")]
    warnings = [w for r in reports for w in r.get("warnings") or []]
    notes = [n for r in reports for n in r.get("notes") or []]
    return {"failed_hosts": failed, "warnings": warnings, "notes": notes}


def run_report(
    controller: Mapping[str, Any],
    reports: Mapping[str, Mapping[str, Any]],
    sweep_warnings: Sequence[str],
    *,
    build_arch: str | None,
    check: bool,
    controller_identity: str,
    prebuild: bool,
    build_host: str,
    verbose: bool = True,
) -> tuple[dict[str, Any], list[str]]:
    """The preflight step's result (``failure`` set when any host has an error) and the lines it prints.

    Without ``verbose`` (``-v``) a large cluster's healthy hosts are folded by state (module_utils._core.fold).
    """
    ordered = [controller, *reports.values()]
    totals = collect(ordered)
    warnings = [*sweep_warnings, *totals["warnings"]]
    summary = [summary_line(r) for r in problems_first(ordered)]
    advisory = glibc_advisory(list(reports.values()))
    data: dict[str, Any] = {
        "ok": not totals["failed_hosts"], "check_mode": check, "controller_identity": controller_identity,
        "prebuild": prebuild, "build_host": build_host, "build_arch": build_arch, "controller": dict(controller),
        "hosts": {h: dict(r) for h, r in reports.items()}, "failed_hosts": totals["failed_hosts"],
        "warnings": warnings, "advisory": advisory, "summary": summary,
    }
    header = f"flodl preflight ({len(reports)} worker(s) of the play"
    header += f", build arch {build_arch})" if build_arch else ")"
    lines = [header, *fold([summary_row(r) for r in problems_first(ordered)], verbose)] + ([advisory] if advisory else [])
    if check:
        lines.append("flodl preflight probes (check mode; the probe only reads):")
        lines += [f"  {h}: {r['probe_command']}" for h, r in reports.items() if "probe_command" in r]
    if totals["failed_hosts"] or controller.get("errors"):
        data["failure"] = failure_message(ordered, warnings).splitlines()
    return data, lines
