# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight policy: the one-round-trip host probe and what its answers mean.

Pure functions only (no I/O): the action plugin ``flodl.cluster.preflight_check``
runs the probe over ssh and feeds the raw output here. Behaviour follows
fdl-cli's pre-flight host check (docs/launcher-contract.md §3a step 4 and §7a):

* a declared (explicit) data path that is missing is an error, the
  convention default ``/flodl/data`` missing is only a warning, a present
  but unreadable path is always an error;
* when prebuilding, the worker's CPU arch must equal the build host's
  (compared first), musl libc is an error, a glibc banner is an advisory
  note, an empty ``uname -m`` is indeterminate (warning), an explicit
  ``absent`` pkill is a warning;
* an unreachable host or a failed probe is a warning, never an error: the
  real fan-out ssh reports genuine connectivity problems anyway; except a
  failed host-key verification, which is an error with its fix (a host ssh
  cannot authenticate was not checked, and must not pass as "unreachable");
* ``local_devices: all`` needs a GPU count; zero usable GPUs is an error.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils.fold import Row, fold
from ansible_collections.flodl.cluster.plugins.module_utils.shell import posix_quote
from ansible_collections.flodl.cluster.plugins.module_utils.ssh import target_of
from ansible_collections.flodl.cluster.plugins.module_utils.topology import TopologyError, device_count

ERROR = "error"
WARNING = "warning"
NOTE = "note"

STATUS_OK = "ok"
STATUS_WARNING = "warning"
STATUS_ERROR = "error"
STATUS_UNREACHABLE = "unreachable"

MARK_DIR = "__FLODL_DP_DIR__"
MARK_READ = "__FLODL_DP_READ__"
MARK_ABI = "__FLODL_ABI__"
MARK_LDD = "__FLODL_LDD__"
MARK_PKILL = "__FLODL_PKILL__"
MARK_GPUS = "__FLODL_GPUS__"
MARK_END = "__FLODL_END__"
_SECTIONS = (MARK_ABI, MARK_LDD, MARK_PKILL, MARK_GPUS)

# docs/launcher-contract.md §7a, verbatim: prints "<nvidia> <amd>".
GPU_COUNT_SCRIPT = (
    "n=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l); "
    "a=$(grep -l '^vendor_id 4098$' /sys/class/kfd/kfd/topology/nodes/*/properties 2>/dev/null | wc -l); "
    'echo "$n $a"'
)
ABI_SCRIPT = (
    f"echo {MARK_ABI}; uname -m; echo {MARK_LDD}; ldd --version 2>&1 | head -1; "
    f"echo {MARK_PKILL}; command -v pkill >/dev/null 2>&1 && echo present || echo absent"
)

_GLIBC_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)\s*$")

HOST_KEY_CHANGED = "changed"
HOST_KEY_UNKNOWN = "unknown"
_HOST_KEY_CHANGED = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED", re.IGNORECASE)
_HOST_KEY_UNKNOWN = re.compile(
    r"No \S+ host key is known for .* and you have requested strict checking|Host key verification failed",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    """One thing preflight noticed about a host: ``level`` is error, warning or note."""

    level: str
    check: str
    message: str


# --------------------------------------------------------------------------
# the probe
# --------------------------------------------------------------------------


def data_path_script(path: str) -> str:
    """Directory and readability sentinels for the effective data path."""
    q = posix_quote(path)
    return (
        f"if [ -d {q} ]; then echo {MARK_DIR}=1; else echo {MARK_DIR}=0; fi; "
        f"if [ -r {q} ]; then echo {MARK_READ}=1; else echo {MARK_READ}=0; fi"
    )


def probe_script(data_path: str, *, abi: bool, gpus: bool) -> str:
    """The whole POSIX-sh probe for one host: one ssh, every answer sentinel-delimited."""
    parts = [data_path_script(data_path)]
    if abi:
        parts.append(ABI_SCRIPT)
    if gpus:
        parts.append(f"echo {MARK_GPUS}; {GPU_COUNT_SCRIPT}")
    parts.append(f"echo {MARK_END}")
    return "; ".join(parts)


def remote_command(script: str) -> str:
    """Run the probe under ``sh`` whatever the remote login shell is (fish, csh...)."""
    return "sh -c " + posix_quote(script)


@dataclass
class ProbeOutput:
    """What a probe printed; ``None`` for a section that did not run or did not answer."""

    dir_ok: bool | None = None
    read_ok: bool | None = None
    uname: str | None = None
    ldd: str | None = None
    pkill: str | None = None
    gpus: str | None = None
    complete: bool = False
    sections: dict[str, list[str]] = field(default_factory=dict)


def _flag(value: str) -> bool | None:
    return {"1": True, "0": False}.get(value.strip())


def parse_probe(stdout: str) -> ProbeOutput:
    """Split the probe's stdout on its sentinels (exact lines, so shell noise cannot fake one)."""
    out = ProbeOutput()
    current: str | None = None
    for raw in stdout.splitlines():
        line = raw.strip()
        if line.startswith(MARK_DIR + "="):
            out.dir_ok = _flag(line[len(MARK_DIR) + 1:])
            continue
        if line.startswith(MARK_READ + "="):
            out.read_ok = _flag(line[len(MARK_READ) + 1:])
            continue
        if line in _SECTIONS:
            current = line
            out.sections[current] = []
            continue
        if line == MARK_END:
            out.complete = True
            current = None
            continue
        if current is not None:
            out.sections[current].append(raw.rstrip("\r"))

    def first(mark: str) -> str | None:
        if mark not in out.sections:
            return None
        lines = [ln.strip() for ln in out.sections[mark] if ln.strip()]
        return lines[0] if lines else ""

    out.uname = first(MARK_ABI)
    out.ldd = first(MARK_LDD)
    out.pkill = first(MARK_PKILL)
    if MARK_GPUS in out.sections:
        out.gpus = "\n".join(out.sections[MARK_GPUS])
    return out


def parse_gpu_counts(text: str) -> tuple[int, int]:
    """``(nvidia, amd)`` from the last non-empty line; anything else raises ValueError."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        raise ValueError("the GPU count printed nothing")
    fields = lines[-1].split()
    if len(fields) != 2 or not all(f.isdigit() for f in fields):
        raise ValueError(f"expected two counts '<nvidia> <amd>', got {lines[-1]!r}")
    return int(fields[0]), int(fields[1])


# --------------------------------------------------------------------------
# the checks (one host, one concern each)
# --------------------------------------------------------------------------


def check_abi(host: str, build_arch: str, remote_uname: str, remote_ldd: str) -> Finding | None:
    """Can a binary built on the build host exec on this worker? Arch first, then libc."""
    remote_arch = (remote_uname or "").strip()
    if not remote_arch:
        return Finding(
            WARNING,
            "arch",
            f"{host}: `uname -m` printed nothing, so the CPU arch is unknown and the ABI check was skipped; "
            "a wrong arch would only show at launch as `Exec format error`. Check that uname works there.",
        )
    if remote_arch != build_arch:
        return Finding(
            ERROR,
            "arch",
            f"{host}: CPU arch mismatch: the build host compiles {build_arch} binaries but {host} is "
            f"{remote_arch}; the prebuilt binary would fail there with `Exec format error`. "
            f"Use a {build_arch} worker, or point flodl_build_host at a {remote_arch} build host "
            "(or set flodl_prebuild: false so the host builds natively).",
        )
    banner = (remote_ldd or "").strip()
    lowered = banner.lower()
    if "musl" in lowered:
        return Finding(
            ERROR,
            "libc",
            f"{host}: musl libc (`ldd --version` says {banner.splitlines()[0]!r}); flodl binaries are "
            "linked against glibc and will not load on a musl system such as Alpine. Use a glibc "
            "distribution on this worker (or set flodl_prebuild: false so it builds natively).",
        )
    first_line = banner.splitlines()[0].strip() if banner else ""
    if first_line and ("glibc" in lowered or "gnu libc" in lowered):
        return Finding(
            NOTE,
            "libc",
            f"{host}: glibc reports {first_line!r}; if a run fails with `GLIBC_x.yy not found`, this "
            "worker's glibc is older than the build host's: build on the host with the oldest glibc.",
        )
    return None


def check_data_path(host: str, path: str, declared: bool, is_dir: bool, readable: bool) -> Finding | None:
    """The shared data mount: declared-and-missing is fatal, the convention default only warns."""
    if not is_dir:
        if declared:
            return Finding(
                ERROR,
                "data_path",
                f"{host}: the declared data path {path} is missing (or not a directory); training reads "
                "its data and writes checkpoints on this shared mount, so the run would break there. "
                "Mount the shared filesystem at that path, or correct flodl_data_path.",
            )
        return Finding(
            WARNING,
            "data_path",
            f"{host}: the convention data path {path} is not present (no flodl_data_path declared); "
            f"fine without shared storage, otherwise mount it at {path} or set flodl_data_path.",
        )
    if not readable:
        return Finding(
            ERROR,
            "data_path",
            f"{host}: the data path {path} exists but this ssh user cannot read it; ranks there would "
            "fail to load data or checkpoints. Fix the mount permissions or uid mapping.",
        )
    return None


def check_pkill(host: str, answer: str | None) -> Finding | None:
    """Only an explicit ``absent`` warns; an empty or garbled answer proves nothing."""
    if (answer or "").strip() != "absent":
        return None
    return Finding(
        WARNING,
        "pkill",
        f"{host}: pkill is not installed; stale ranks from an earlier run cannot be cleared before "
        "launch (teardown still works through the per-rank wrapper). Install procps to enable it.",
    )


def check_gpus(worker: Mapping[str, Any], text: str | None) -> tuple[dict[str, int] | None, Finding | None]:
    """GPU counts for ``local_devices: all`` and whether the worker would get any rank."""
    host = str(worker["host"])
    try:
        nvidia, amd = parse_gpu_counts(text or "")
    except ValueError as exc:
        return None, Finding(
            ERROR,
            "gpus",
            f"{host}: flodl_local_devices is `all` but the GPU count could not be read ({exc}); "
            "the launch cannot give this worker ranks. Check nvidia-smi / the AMD KFD driver, "
            "or list the devices explicitly.",
        )
    gpus = {"nvidia": nvidia, "amd": amd}
    try:
        device_count(worker, {host: (nvidia, amd)})
    except TopologyError as exc:
        text = "; ".join(exc.problems)
        if text.startswith(f"host {host}:"):
            text = text[len("host "):]
        return gpus, Finding(ERROR, "gpus", text)
    return gpus, None


def host_key_failure(stderr: str) -> str | None:
    """``changed`` or ``unknown`` when ssh's stderr says host-key verification failed, else None."""
    text = stderr or ""
    if _HOST_KEY_CHANGED.search(text):
        return HOST_KEY_CHANGED
    if _HOST_KEY_UNKNOWN.search(text):
        return HOST_KEY_UNKNOWN
    return None


def host_key_finding(worker: Mapping[str, Any], kind: str) -> Finding:
    """The definitive error for a host whose key ssh would not accept, with the three fixes."""
    host = str(worker["host"])
    ssh = worker.get("ssh") or {}
    target = target_of(worker).rsplit("@", 1)[-1]
    port = ssh.get("port")
    port_opt = f"-p {port} " if port is not None else ""
    entry = f"[{target}]:{port}" if port not in (None, 22, "22") else target
    if kind == HOST_KEY_CHANGED:
        what = (
            f"the host key {target} presented differs from the one in known_hosts (it changed: a reinstall, "
            "or someone in the middle)"
        )
        first = f"check the new key out of band, remove the old entry (`ssh-keygen -R {posix_quote(entry)}`), then "
    else:
        what = f"no host key for {target} is in the controller's known_hosts and ssh checks strictly"
        first = ""
    return Finding(
        ERROR,
        "host_key",
        f"{host}: ssh host-key verification failed: {what}. Preflight could not check this host, and "
        "flodl's ssh fan-out needs a host it can authenticate. Fix: "
        f"{first}record the key with `ssh-keyscan -H {port_opt}{posix_quote(target)} >> ~/.ssh/known_hosts` "
        "on the controller; under AWX, ship that known_hosts file in the execution environment; or opt in "
        "for this worker alone with `StrictHostKeyChecking=accept-new` in its flodl_ssh.options "
        "(never StrictHostKeyChecking=no).",
    )


def unreachable_finding(host: str, why: str) -> Finding:
    return Finding(
        WARNING,
        "ssh",
        f"{host}: preflight probe could not run ({why}); this host was not checked. The launch "
        "reports a real connectivity problem itself, so this only warns. Check ssh to it.",
    )


# --------------------------------------------------------------------------
# per-host verdicts
# --------------------------------------------------------------------------


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


def _report(host: str, findings: Sequence[Finding], **fields: Any) -> dict[str, Any]:
    report: dict[str, Any] = {"host": host}
    report.update(fields)
    report["errors"] = [f.message for f in findings if f.level == ERROR]
    report["warnings"] = [f.message for f in findings if f.level == WARNING]
    report["notes"] = [f.message for f in findings if f.level == NOTE]
    return report


def _data_path_state(is_dir: bool | None, readable: bool | None) -> str:
    if is_dir is None:
        return "unknown"
    if not is_dir:
        return "missing"
    return "ok" if readable else "unreadable"


def controller_report(host: str, path: str, declared: bool, is_dir: bool, readable: bool) -> dict[str, Any]:
    """The controller's local data-path check (no ssh)."""
    findings = [f for f in [check_data_path(host, path, declared, is_dir, readable)] if f]
    return _report(
        host,
        findings,
        role="controller",
        status=_status(findings),
        data_path={"path": path, "declared": declared, "state": _data_path_state(is_dir, readable)},
    )


def evaluate_remote(
    worker: Mapping[str, Any],
    *,
    data_path: str,
    declared: bool,
    prebuild: bool,
    build_arch: str | None,
    returncode: int | None,
    stdout: str,
    stderr: str = "",
    error: str | None = None,
) -> dict[str, Any]:
    """One worker's verdict from its probe's outcome."""
    host = str(worker["host"])
    wants_gpus = worker.get("local_devices") == "all"
    base: dict[str, Any] = {
        "arch": None,
        "libc": None,
        "ldd": None,
        "pkill": None,
        "gpus": None,
        "data_path": {"path": data_path, "declared": declared, "state": "unknown"},
    }
    probe = parse_probe(stdout or "")
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
        findings = [unreachable_finding(host, why)]
        reached = returncode not in (None, 255) and not error
        return _report(host, findings, status=_status(findings, reached=reached), **base)

    findings: list[Finding] = []
    is_dir, readable = bool(probe.dir_ok), bool(probe.read_ok)
    base["data_path"]["state"] = _data_path_state(is_dir, readable)
    finding = check_data_path(host, data_path, declared, is_dir, readable)
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


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


# --------------------------------------------------------------------------
# the whole run
# --------------------------------------------------------------------------


def summary_line(report: Mapping[str, Any]) -> str:
    """``h1: ok — x86_64, glibc 2.36, data /flodl/data ok, gpus 2 nvidia / 0 amd``."""
    label, state = _summary_parts(report)
    return f"{label}: {state}"


def summary_row(report: Mapping[str, Any]) -> Row:
    """The host's summary line, and its state without the host's name (what healthy hosts fold by)."""
    label, state = _summary_parts(report)
    return Row(host=label, line=f"{label}: {state}", state=state,
               problem=report.get("status") != STATUS_OK or report.get("role") == "controller")


def _summary_parts(report: Mapping[str, Any]) -> tuple[str, str]:
    parts: list[str] = []
    label = str(report["host"])
    if report.get("role") == "controller":
        label = f"controller {label}"
        parts.append("local checks")
    elif report.get("controller"):
        parts.append("the controller's own box, no ssh")
    if report.get("arch"):
        parts.append(str(report["arch"]))
    if report.get("libc"):
        parts.append(str(report["libc"]))
    dp = report.get("data_path") or {}
    if dp:
        parts.append(f"data {dp.get('path')} {dp.get('state')}")
    if report.get("pkill") == "absent":
        parts.append("no pkill")
    gpus = report.get("gpus")
    if gpus:
        parts.append(f"gpus {gpus['nvidia']} nvidia / {gpus['amd']} amd")
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


def local_worker_report(
    worker: Mapping[str, Any], controller: Mapping[str, Any], arch: str, gpu_text: str | None
) -> dict[str, Any]:
    """The controller's own worker entry: covered by the controller's checks, no ssh.

    ``gpu_text`` is the local GPU count output, for a ``local_devices: all`` worker.
    """
    report: dict[str, Any] = {
        "host": worker["host"],
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
    if worker.get("local_devices") == "all":
        gpus, finding = check_gpus(worker, gpu_text)
        report["gpus"] = gpus
        if finding:
            report["errors"].append(finding.message)
            report["status"] = STATUS_ERROR
    return report


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

    Without ``verbose`` (``-v``) a large cluster's healthy hosts are folded by state (module_utils.fold).
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
