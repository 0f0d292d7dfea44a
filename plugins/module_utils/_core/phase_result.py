# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-worker outcomes of a run-once phase, in Ansible's result vocabulary.

A phase step runs once on the controller (one parallel sweep is what keeps
it fast) and files one entry per inventory host under ``per_host``. Each
worker then reports its own entry, so PLAY RECAP, ansible-runner events and
AWX host summaries show every worker by name:

- ``ok`` / ``changed``: the phase found nothing wrong on that host;
- ``failed``: a definitive problem, with the host's own message;
- ``unreachable``: the probe could not connect. Reported as *skipped* with
  the reason (and a warning naming the host): the host's checks were indeed
  skipped, the recap and AWX count it apart from ok hosts, and the run goes
  on (flodl's stance: an unreachable host is a warning until the launcher
  needs it). Not Ansible's UNREACHABLE: with ``any_errors_fatal`` even an
  ignored UNREACHABLE stops the play;
- ``skipped``: the phase has nothing to do on that host (the controller's
  own box needs no build, a host outside ``--limit``).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

STATUSES = ("ok", "changed", "failed", "unreachable", "skipped")


def entry(status: str, msg: str, /, **data: Any) -> dict[str, Any]:
    """One ``per_host`` entry."""
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}")
    return {"status": status, "msg": msg, "data": data}


def hosts_entry(status: str, msg: str, host: str) -> dict[str, Any]:
    """One ``per_host`` entry whose data is the phase result's ``hosts[host]``, named rather than copied: a copy
    per worker would double what every later task and AWX job event carries."""
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}")
    return {"status": status, "msg": msg, "host": host}


def entry_data(phase_result: Mapping[str, Any], found: Mapping[str, Any]) -> dict[str, Any]:
    """The data of one ``per_host`` entry: its own, or the ``hosts`` entry it names."""
    if "data" in found:
        return dict(found.get("data") or {})
    hosts = phase_result.get("hosts")
    named = hosts.get(found.get("host")) if isinstance(hosts, Mapping) else None
    return dict(named) if isinstance(named, Mapping) else {}


def worker_part(phase_result: Mapping[str, Any], inventory_hostname: str) -> dict[str, Any]:
    """What one worker's report reads of a phase result: its ``per_host`` entry, and the ``hosts`` entry it names.
    Empty when the phase filed nothing for it."""
    per_host = phase_result.get("per_host")
    found = per_host.get(inventory_hostname) if isinstance(per_host, Mapping) else None
    if found is None:
        return {}
    part: dict[str, Any] = {"per_host": {inventory_hostname: found}}
    hosts = phase_result.get("hosts")
    named = found.get("host") if isinstance(found, Mapping) and "data" not in found else None
    if isinstance(hosts, Mapping) and named in hosts:
        part["hosts"] = {named: hosts[named]}
    return part


def worker_outcome(phase: str, inventory_hostname: str, phase_result: Mapping[str, Any]) -> dict[str, Any]:
    """The task result one worker reports for ``phase``."""
    per_host = phase_result.get("per_host") or {}
    found = per_host.get(inventory_hostname)
    if not isinstance(found, Mapping):
        return {
            "skipped": True,
            "changed": False,
            "msg": f"{phase}: no result for {inventory_hostname} (not part of this phase's run)",
        }
    status = str(found.get("status"))
    out: dict[str, Any] = {"changed": status == "changed", "msg": str(found.get("msg") or ""),
                           phase: entry_data(phase_result, found)}
    if status == "failed":
        out["failed"] = True
    elif status == "unreachable":
        # Shown with its reason even without -v (like debug), so the skip is never silent.
        out.update(skipped=True, flodl_unreachable=True, _ansible_verbose_always=True, msg=f"UNREACHABLE for {phase}, its checks were skipped: "
                   + out["msg"])
    elif status == "skipped":
        out["skipped"] = True
    return out


def run_outcome(phase: str, inventory_hostname: str, phase_result: Mapping[str, Any]) -> dict[str, Any]:
    """The task result of a play host that is not a worker (a runbook on ``localhost``): the run's verdict.

    Such a host speaks for every worker of the run, so it fails when any of them failed: a role used in a
    play on the controller must not pass a run whose workers failed.
    """
    per_host = phase_result.get("per_host") or {}
    statuses = {str(h): str(e.get("status")) for h, e in per_host.items() if isinstance(e, Mapping)}
    if not statuses:
        return {"skipped": True, "changed": False, "msg": f"{phase}: no worker result for this run"}
    failed = [h for h, s in statuses.items() if s == "failed"]
    unreachable = [h for h, s in statuses.items() if s == "unreachable"]
    counts = ", ".join(f"{sum(1 for s in statuses.values() if s == status)} {status}"
                       for status in STATUSES if status in statuses.values())
    head = f"{phase} for {len(statuses)} worker(s), reported on {inventory_hostname}: {counts}"
    out: dict[str, Any] = {"changed": "changed" in statuses.values(), phase: {"workers": statuses}}
    if failed:
        lines = [_named(h, str(per_host[h].get("msg") or "failed")) for h in failed]
        out.update(failed=True, msg="\n".join([head, *lines]))
    else:
        out["msg"] = head + (f" (unreachable: {', '.join(unreachable)})" if unreachable else "")
        if unreachable:
            out["_ansible_verbose_always"] = True
    return out


def with_prior(
    phase: str, prior_phase: str, inventory_hostname: str, phase_result: Mapping[str, Any],
    prior_result: Mapping[str, Any], *, worker: bool = True,
) -> dict[str, Any]:
    """One report for two phases run back to back (cluster_train's build, then its launch): one task per worker.

    The earlier phase's failure wins: that worker fails with its own build (the launch did not start, the
    playbook gates it on the builds). A worker the later phase did not reach reports the earlier one. Else
    the later phase decides, with the earlier one's data beside it and its change counted.
    """
    if not worker:
        prior = run_outcome(prior_phase, inventory_hostname, prior_result)
        return prior if prior.get("failed") else run_outcome(phase, inventory_hostname, phase_result)
    before = worker_outcome(prior_phase, inventory_hostname, prior_result)
    if before.get("failed"):
        return before
    found = (phase_result.get("per_host") or {}).get(inventory_hostname)
    if not isinstance(found, Mapping):
        return dict(before, msg=f"{before['msg']} ({phase} did not run)")
    out = worker_outcome(phase, inventory_hostname, phase_result)
    if prior_phase in before:
        out[prior_phase] = before[prior_phase]
        out["msg"] = f"{prior_phase}: {before['msg']}; {phase}: {out['msg']}"
    out["changed"] = bool(out.get("changed") or before.get("changed"))
    return out


def _named(host: str, msg: str) -> str:
    """``msg`` led by the host's name, unless it already names the host before its first colon."""
    head = msg.split(":", 1)[0]
    return msg if re.search(rf"(?<![\w.-]){re.escape(host)}(?![\w.-])", head) else f"{host}: {msg}"


def preflight_entries(
    reports: Mapping[str, Mapping[str, Any]], inventory_names: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """``per_host`` for preflight: the host's errors fail it, an unconnectable probe is unreachable."""
    out: dict[str, dict[str, Any]] = {}
    for host, report in reports.items():
        name = inventory_names.get(host, host)
        errors = list(report.get("errors") or [])
        warnings = list(report.get("warnings") or [])
        status = str(report.get("status"))
        if errors and status != "unreachable":
            out[name] = hosts_entry("failed", " | ".join(errors), host)
        elif status == "unreachable":
            out[name] = hosts_entry("unreachable", " | ".join(warnings or errors) or "the probe could not connect", host)
        else:
            text = "preflight passed" + (": " + " | ".join(warnings) if warnings else "")
            out[name] = hosts_entry("ok", text, host)
    return out


def prebuild_entries(
    module_result: Mapping[str, Any],
    workers: list[str],
    inventory_names: Mapping[str, str],
    controller_identity: str,
) -> dict[str, dict[str, Any]]:
    """``per_host`` for prebuild: each remote worker's build (``workers``: hosts), the controller's box skipped."""
    hosts = module_result.get("hosts") or {}
    failed = set(module_result.get("failed_hosts") or [])
    out: dict[str, dict[str, Any]] = {}
    for host in workers:
        name = inventory_names.get(host, host)
        build = hosts.get(host)
        if host == controller_identity:
            out[name] = entry("skipped", "the controller's own box runs the launcher's local ranks: no prebuild")
        elif build is None:
            out[name] = entry("skipped", "no build ran for this host")
        elif host in failed or build.get("status") == "failed":
            reason = (module_result.get("failures") or {}).get(host)
            tail = "\n".join(build.get("tail") or [])
            out[name] = hosts_entry("failed", reason or f"build for {build.get('arch')} failed: `{build.get('command')}`"
                                    + (f"\n{tail}" if tail else ""), host)
        else:
            status = "changed" if build.get("changed") else "ok"
            out[name] = hosts_entry(status, f"{build.get('status')}: {build.get('bin')}", host)
    return out


REFUSED = "refused before contact (no host was contacted)"


def refused_entries(
    play_hosts: list[str], problems: list[str], per_host: Mapping[str, list[str]], why: str = REFUSED
) -> dict[str, dict[str, Any]]:
    """``per_host`` for a run refused on its variables: each worker fails with its own problems.

    Problems of the run itself fail every worker (as Ansible's per-host validation would): the step that
    found them passes, so that PLAY RECAP charges every worker rather than the one the step ran on. A
    worker with none of its own is skipped while others fail, or fails with theirs when they are outside
    the play (a limited preflight must not pass on a run that is refused). ``why`` leads each message.
    """
    own = {p for found in per_host.values() for p in found}
    run_level = [p for p in problems if p not in own]
    failing = [h for h in play_hosts if per_host.get(h)]
    others = [h for h in per_host if h not in play_hosts]
    out: dict[str, dict[str, Any]] = {}
    for host in play_hosts:
        mine = list(per_host.get(host) or []) + run_level
        if mine:
            out[host] = entry("failed", f"{why}: " + " | ".join(mine), problems=mine)
        elif failing:
            out[host] = entry("skipped", f"not contacted: the run was refused for the variables of {', '.join(failing)}")
        else:
            out[host] = entry("failed", f"{why}, for the variables of {', '.join(others)} (outside this play): "
                              + " | ".join(problems), problems=list(problems))
    return out


def run_failed_entries(per_host: Mapping[str, Mapping[str, Any]], why: str) -> dict[str, dict[str, Any]]:
    """``per_host`` once the run failed as a whole after contact (the controller's own checks): a worker that
    did not fail of its own fails with ``why``, its own finding kept after it. Skipped or passed, the run
    would go on in PLAY RECAP while nothing more of it can run."""
    out: dict[str, dict[str, Any]] = {}
    for host, found in per_host.items():
        if str(found.get("status")) == "failed":
            out[host] = dict(found)
        else:
            own = str(found.get("msg") or "")
            out[host] = dict(found, status="failed", msg=why + (f" (here: {own})" if own else ""))
    return out
