# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prebuild's per-host entries and the operator's summary of them (pure functions)."""
from __future__ import annotations

from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild import PrebuildPlan


def host_entry(plan: PrebuildPlan, host: str) -> dict[str, Any]:
    target = next(t for t in plan.targets if t.host == host)
    entry: dict[str, Any] = {"host": host, "arch": target.arch, "path": target.path}
    if target.target_rel:
        entry.update(
            bin=f"{target.target_rel}/release/{plan.cmd}",
            binary=target.binary,
            target_dir=target.target_dir,
        )
    step = plan.step_for(host)
    if step is not None:
        entry.update(
            built_by=step.host,
            features=step.feature,
            command=step.command,
            cwd=step.cwd,
            env=dict(step.env),
            log=step.log_path,
        )
    return entry


def _env_text(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(env.items()))


def summary(plan: PrebuildPlan, hosts: dict[str, dict[str, Any]], *, check: bool) -> list[str]:
    """The header, then one line per host (the ones that cannot build or failed first)."""
    return [_summary_header(plan, hosts)] + [row["line"] for row in summary_rows(hosts, check=check)]


def _summary_header(plan: PrebuildPlan, hosts: dict[str, dict[str, Any]]) -> str:
    return (f"{plan.mode} prebuild of --bin {plan.cmd} for {len(hosts)} remote host(s): "
            f"{len(plan.steps)} build(s), dedupe {'on' if plan.dedupe else 'off'}")


def summary_rows(hosts: dict[str, dict[str, Any]], *, check: bool) -> list[dict[str, Any]]:
    """Per host: its line, its state without the host's own paths (what healthy hosts fold by), a problem or not."""
    ok = ("built", "up to date", "linked", "would build", "would link")
    rows = []
    for host, entry in sorted(hosts.items(), key=lambda item: item[1].get("status", "planned") in ok):
        head = f"{host} [{entry.get('arch') or 'no flodl_arch'}]"
        status = entry.get("status", "planned")
        state = f"[{entry.get('arch') or 'no flodl_arch'}] {status}"
        if check:
            if status == "would build":
                line = (f"{head}: would run in {entry['cwd']}: {_env_text(entry['env'])} sh -c {entry['command']!r} "
                        f"-> {entry['bin']}")
            elif status == "would link":
                line = f"{head}: would link the binary built for {entry['built_by']} -> {entry['bin']}"
            else:
                line = f"{head}: cannot build"
        elif status in ("built", "up to date"):
            line = f"{head}: {status} in {entry['seconds']}s -> {entry['bin']}"
        elif status == "linked":
            what = "linked" if entry.get("changed") else "already linked"
            line = f"{head}: {what} from the build of {entry['built_by']} -> {entry['bin']}"
            state = f"[{entry.get('arch') or 'no flodl_arch'}] {what} from another host's build"
        else:
            line = f"{head}: FAILED"
        rows.append({"host": host, "line": line, "state": state, "problem": status not in ok})
    return rows
