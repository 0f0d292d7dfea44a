# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch plan as an operator reads it: a summary by default, the whole plan with ``-v`` and in check mode."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.fold import Row, fold
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_decode
from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import entry
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import holds_secret, redacted_topology


def plan_lines(
    plan: le.LaunchPlan,
    env: Mapping[str, str],
    envelope_text: str | None,
    envelope_source: str | None,
    log_dir: str,
    full: bool,
    guard: str | None,
    shown_json: str | None,
    secret: bool,
    verbose: bool = True,
    inventory_names: Mapping[str, str] | None = None,
) -> list[str]:
    """Command, cwd, log, every added variable and the decoded topology; secrets withheld.

    ``full`` (check mode) prints long values whole; otherwise they are cut. Neither ``full`` nor
    ``verbose`` (``-v``): :func:`summary_lines`, whose length grows by one line per worker.
    """
    lines = ["flodl launch plan" + (" (check mode: nothing runs, nothing is written)" if full else "")]
    lines.append(f"  command : {plan.command}")
    lines.append(f"  cwd     : {plan.cwd}")
    lines.append(f"  log     : {log_dir}/launch-<timestamp>.log")
    if guard:
        lines.append(f"  recursion guard: {guard}")
        return lines
    if not full and not verbose:
        return lines + summary_lines(plan, env, envelope_text, inventory_names or {}, secret)
    lines.append("  environment added to the controller's own:")
    for name in sorted(env):
        value = env[name]
        if secret and name in le.SECRET_VARS:
            value = f"<{len(value)} hex chars withheld: they hold controller.join.token>"
        elif not full and len(value) > 96:
            value = f"{value[:64]}… ({len(value)} chars)"
        lines.append(f"    {name}={value}")
    if shown_json:
        note = ", join token redacted" if secret else ""
        lines.append(f"  topology ({le.ENV_FULL_CLUSTER_JSON}, decoded{note}):")
        text = shown_json if secret else hex_decode(env[le.ENV_FULL_CLUSTER_JSON]).decode("utf-8")
        lines += [f"    {line}" for line in text.splitlines()]
    if envelope_text:
        lines.append(f"  prebuild envelope ({le.ENV_PREBUILD_PER_HOST}, from {envelope_source}):")
        for host, built in sorted(json.loads(envelope_text).items()):
            lines.append(f"    {host}: {json.dumps(built, sort_keys=True)}")
    if plan.overlay_path:
        lines.append(f"  compose overlay {plan.overlay_path}:")
        lines += [f"    {line}" for line in (plan.overlay or "").splitlines()]
    return lines


SHORT_VALUE = 96  # a value up to this long is shown in the summary; a longer one by its size


def ranks_text(ranks: Any) -> str:
    """``0-3`` for a run of consecutive ranks, else the list; ``none`` for an orchestrator-only entry."""
    if not isinstance(ranks, list) or not ranks:
        return "none"
    if all(isinstance(r, int) for r in ranks) and ranks == list(range(ranks[0], ranks[0] + len(ranks))):
        return str(ranks[0]) if len(ranks) == 1 else f"{ranks[0]}-{ranks[-1]}"
    return ",".join(str(r) for r in ranks)


def _size_text(name: str, value: str) -> str:
    """``NAME=value`` and its NUL, as exec counts it (launch_size.entry_bytes)."""
    kind = ", hex-encoded JSON" if name in le.SECRET_VARS else ""
    return f"<{len(name) + len(value.encode('utf-8', 'surrogateescape')) + 2} bytes{kind}>"


def worker_line(worker: Mapping[str, Any], inventory_names: Mapping[str, str], built: Mapping[str, Any]) -> str:
    """One worker of the launched topology on one line: where it runs, its ranks, how it is reached."""
    host = str(worker.get("host"))
    name = inventory_names.get(host, host)
    label = host if name == host else f"{name} (host {host})"
    devices = worker.get("local_devices")
    parts = [f"ranks {ranks_text(worker.get('ranks'))}",
             f"devices {devices if devices == 'all' else ranks_text(devices)}"]
    ssh = worker.get("ssh")
    if isinstance(ssh, Mapping):
        where = str(ssh.get("target") or host)
        if ssh.get("user"):
            where = f"{ssh['user']}@{where}"
        if ssh.get("port"):
            where = f"{where}:{ssh['port']}"
        options = ssh.get("options") or []
        parts.append(f"ssh {where}" + (f" ({len(options)} option(s))" if options else ""))
    else:
        parts.append("no ssh")
    entry = built.get(host)
    if isinstance(entry, Mapping) and entry.get("bin"):
        parts.append(f"prebuilt {entry['bin']}")
    return f"    {label}: " + ", ".join(parts)


def summary_lines(plan: le.LaunchPlan, env: Mapping[str, str], envelope_text: str | None,
                  inventory_names: Mapping[str, str], secret: bool = False) -> list[str]:
    """Each added variable with its value when short (its size otherwise), then one line per worker."""
    note = ", join token redacted" if secret else ""
    lines = [f"  environment added to the controller's own (values by size; -v shows the decoded topology{note}):"]
    for name in sorted(env):
        value = env[name]
        short = len(value) <= SHORT_VALUE and name not in le.SECRET_VARS
        lines.append(f"    {name}={value}" if short else f"    {name}={_size_text(name, value)}")
    if plan.overlay_path:
        lines.append(f"  compose overlay {plan.overlay_path} (extra_hosts for {len(plan.extra_hosts)} host(s))")
    workers = (plan.topology or {}).get("workers") or []
    built = json.loads(envelope_text) if envelope_text else {}
    lines.append(f"  workers ({len(workers)}):")
    lines += fold([worker_row(w, inventory_names, built) for w in workers], verbose=False, indent="    ")
    return lines


def worker_row(worker: Mapping[str, Any], inventory_names: Mapping[str, str], built: Mapping[str, Any]) -> Row:
    """:func:`worker_line`, and what it shares with the other workers (rank count, how reached, prebuilt)."""
    host = str(worker.get("host"))
    ssh = worker.get("ssh")
    reach = "no ssh (the controller's own box)"
    if isinstance(ssh, Mapping):
        reach = "ssh" + (f" as {ssh['user']}" if ssh.get("user") else "") + (f" port {ssh['port']}" if ssh.get("port") else "")
    entry = built.get(host)
    prebuilt = ", prebuilt" if isinstance(entry, Mapping) and entry.get("bin") else ""
    state = f"{len(worker.get('ranks') or [])} rank(s) each, {reach}{prebuilt}"
    return Row(host=inventory_names.get(host, host), line=worker_line(worker, inventory_names, built).strip(),
               state=state)


def outcome_fields(
    rc: int,
    seconds: float,
    tail: list[str],
    log_path: str,
    *,
    interrupted: str | None = None,
    stop_note: str = "",
    orphan_cleanup: str = "",
    timed_out: bool = False,
    timeout: float = 0.0,
    grace: float = 0.0,
) -> dict[str, object]:
    """The task result fields for how the launch command ended; ``interrupted`` is the signal's name."""
    out: dict[str, object] = {"changed": True, "rc": rc, "log_file": log_path, "seconds": seconds,
                              "stdout_tail": list(tail)}
    if interrupted is not None:
        out.update(failed=True, interrupted=interrupted, orphan_cleanup=orphan_cleanup, msg=(
            f"the launch command was interrupted by {interrupted}: its process group was stopped "
            f"({stop_note}); orphan cleanup: {orphan_cleanup}; log: {log_path}"))
    elif timed_out:
        out.update(failed=True, timed_out=True, msg=(
            f"the launch command did not finish within flodl_launch_timeout={timeout:g}s: its process "
            f"group was stopped (TERM, then KILL after {grace:g}s); log: {log_path}"))
    elif rc != 0:
        how = f"signal {-rc}" if rc < 0 else f"code {rc}"
        last = "\n".join(f"  {line}" for line in tail[-12:])
        out.update(failed=True, msg=f"the launch command exited with {how} (rc={rc}) after "
                   f"{seconds:.1f}s; log: {log_path}\nlast lines:\n{last}")
        if rc < 0:
            out.update(rc=128 - rc, signal=-rc)  # a shell's convention, as an operator's scripts expect
        del out["stdout_tail"]  # already in msg; keeps the failure readable
    else:
        out["msg"] = f"the launch command exited with code 0 after {seconds:.1f}s; log: {log_path}"
    return out


def plan_fields(
    plan: le.LaunchPlan,
    *,
    envelope_text: str | None,
    envelope_source: str | None,
    log_dir: str,
    check: bool,
    guard: str | None,
    inventory_names: Mapping[str, str],
    verbose: bool = True,
) -> dict[str, Any]:
    """The launch step's task result for a prepared plan: what runs, the printable plan, each worker's entry.

    A topology holding ``controller.join.token`` is shown redacted, here and in the plan's lines.
    """
    secret = holds_secret(plan.topology)
    shown = redacted_topology(plan.topology) if plan.topology else None
    shown_json = json.dumps(shown, indent=2, ensure_ascii=False) if secret and shown else plan.topology_json
    env = dict(plan.env)
    lines = plan_lines(plan, env, envelope_text, envelope_source, log_dir, check, guard, shown_json, secret,
                       verbose=verbose, inventory_names=inventory_names)
    ranks = {str(w["host"]): w.get("ranks") for w in (plan.topology or {}).get("workers", [])}
    return {
        "command": plan.command, "cwd": plan.cwd, "env": env, "guarded": plan.guarded,
        "topology": shown, "topology_json": shown_json, "topology_redacted": secret,
        "prebuild_envelope": json.loads(envelope_text) if envelope_text else None,
        "prebuild_envelope_source": envelope_source, "extra_hosts": [f"{h}:{ip}" for h, ip in plan.extra_hosts],
        "overlay_path": plan.overlay_path, "overlay": plan.overlay, "launcher_root": plan.launcher_root,
        "log_dir": log_dir, "plan": lines,
        # Each entry names its flodl host: the launcher's reports of failing ranks name that, not the inventory's.
        "per_host": {inventory_names.get(h, h): entry("ok", f"in the launched run, ranks {r}", ranks=r, host=h)
                     for h, r in ranks.items()},
    }
