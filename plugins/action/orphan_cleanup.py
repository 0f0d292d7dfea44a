# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop leftover rank processes of the prebuilt binary on every remote worker (§3g)."""
from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils.identity import controller_user
from ansible_collections.flodl.cluster.plugins.module_utils.launch_env import join_root
from ansible_collections.flodl.cluster.plugins.module_utils.prebuild import ENVELOPE_FILE_REL, binary_subpath
from ansible_collections.flodl.cluster.plugins.module_utils.shell import always_quote
from ansible_collections.flodl.cluster.plugins.module_utils.ssh import launcher_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils.processes import run_for_output, run_parallel
from ansible_collections.flodl.cluster.plugins.module_utils.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import build_context, fail_result, plain

display = Display()

_ERE_SPECIAL = re.compile(r"([.\[\]\\^$*+?(){}|])")


def self_safe_pattern(abs_bin: str) -> str:
    """An ERE matching ``abs_bin`` literally whose own text does not match it.

    ``pkill -f`` compares against full command lines, and the remote shell
    running the cleanup carries the pattern in its own command line: a plain
    pattern would make pkill kill that shell before the KILL pass. Putting
    the first character in a bracket expression (``[/]srv/...``) keeps the
    match while the literal text ``[/]`` no longer matches. The pattern is
    anchored to the start of the command line, so only processes *of* the
    binary match (not, say, an editor or a wrapper shell naming the path).
    """
    if abs_bin.startswith("/"):
        return "^[/]" + _ERE_SPECIAL.sub(r"\\\1", abs_bin[1:]) + "( |$)"
    return "^" + _ERE_SPECIAL.sub(r"\\\1", abs_bin) + "( |$)"


def cleanup_script(abs_bin: str) -> str:
    """TERM, a one-second grace, KILL (§3g); reports pkill's absence and what was found."""
    pat = always_quote(self_safe_pattern(abs_bin))
    return (
        "if ! command -v pkill >/dev/null 2>&1; then echo __FLODL_PKILL__=absent; exit 0; fi; "
        f"n=$(pgrep -f {pat} 2>/dev/null | wc -l); echo __FLODL_FOUND__=$n; "
        f'if [ "$n" -gt 0 ]; then pkill -TERM -f {pat} >/dev/null 2>&1; sleep 1; '
        f"pkill -KILL -f {pat} >/dev/null 2>&1; fi; "
        f"echo __FLODL_LEFT__=$(pgrep -f {pat} 2>/dev/null | wc -l); true"
    )


def _marker(stdout: str, name: str) -> str | None:
    for line in stdout.splitlines():
        if line.startswith(f"__FLODL_{name}__="):
            return line.split("=", 1)[1].strip()
    return None


class ActionModule(ActionBase):
    """Parallel ssh with the launcher's own argv; idempotent: nothing found means ``ok``."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(
            argument_spec={
                "prebuild_envelope": {"type": "raw"},
                "timeout": {"type": "float", "default": 30.0},
            }
        )
        try:
            ctx = build_context(task_vars, self._templar, ["teardown"])
        except TopologyError as exc:
            return fail_result(result, exc.problems)
        envelope, source = self._envelope(ctx.project_root, args, task_vars)
        targets: dict[str, dict[str, Any]] = {}
        skipped: list[str] = []
        for worker in ctx.remotes:
            host = worker["host"]
            entry = envelope.get(host) if envelope is not None else None
            if entry and entry.get("bin"):
                rel = str(entry["bin"])
            elif envelope is None and ctx.cmd and worker.get("arch"):
                rel = binary_subpath(host, str(worker["arch"]), ctx.cmd)
            else:
                skipped.append(host)
                continue
            abs_bin = rel if rel.startswith("/") else f"{str(worker['path']).rstrip('/')}/{rel}"
            targets[host] = {"worker": worker, "bin": abs_bin}

        user = controller_user(os.environ, run_for_output)
        jobs = {
            host: launcher_argv(t["worker"], cleanup_script(t["bin"]), host_user=user, project_root=ctx.project_root)
            for host, t in targets.items()
        }
        if self._task.check_mode:
            plan = [f"{host}: would stop processes of {t['bin']}" for host, t in targets.items()]
            plan += [f"{host}: no prebuilt binary known, nothing to stop" for host in skipped]
            display.display("flodl teardown plan (check mode):\n  " + "\n  ".join(plan or ["no remote worker"]))
            result.update(changed=False, hosts={h: {"bin": t["bin"]} for h, t in targets.items()},
                          skipped_hosts=skipped, envelope_source=source, plan=plan)
            return result

        report: dict[str, dict[str, Any]] = {}
        warnings: list[str] = []
        changed = False
        for host, res in run_parallel(jobs, timeout=float(args["timeout"])).items():
            entry: dict[str, Any] = {"bin": targets[host]["bin"], "argv": res.argv}
            if not res.ok:
                why = res.error or f"ssh exited {res.returncode}: {res.stderr.strip()[-300:]}"
                entry["status"] = "unreachable"
                warnings.append(f"host {host}: cleanup could not run ({why}); rank processes may remain there")
            elif _marker(res.stdout, "PKILL") == "absent":
                entry["status"] = "no_pkill"
                warnings.append(
                    f"host {host}: pkill is not installed, so leftover ranks of {targets[host]['bin']} cannot be "
                    "stopped by name; install procps (only the launcher's trap wrapper protects this host)"
                )
            else:
                found = int(_marker(res.stdout, "FOUND") or 0)
                left = int(_marker(res.stdout, "LEFT") or 0)
                entry.update(status="cleaned" if found else "clean", found=found, left=left)
                changed = changed or found > 0
                if left:
                    warnings.append(f"host {host}: {left} process(es) of {targets[host]['bin']} survived SIGKILL")
            report[host] = entry
        lines = [
            f"{h}: {e['status']}" + (f" ({e.get('found')} stopped)" if e.get("found") else "") + f" — {e['bin']}"
            for h, e in report.items()
        ]
        lines += [f"{h}: skipped (no prebuilt binary known)" for h in skipped]
        display.display("flodl teardown:\n  " + "\n  ".join(lines or ["no remote worker"]))
        for warning in warnings:
            display.warning(warning)
        result.update(
            changed=changed,
            hosts=report,
            skipped_hosts=skipped,
            envelope_source=source,
            summary=lines,
            msg=f"orphan cleanup ran on {len(report)} host(s), {len(warnings)} warning(s)",
        )
        return result

    def _envelope(
        self, project_root: str, args: Mapping[str, Any], task_vars: Mapping[str, Any]
    ) -> tuple[dict[str, Any] | None, str]:
        value = args["prebuild_envelope"]
        source = "task argument"
        if value is None and "flodl_prebuild_envelope" in task_vars:
            value, source = plain(self._templar.template(task_vars["flodl_prebuild_envelope"])), "fact"
        if value is None and "flodl_prebuild_envelope_json" in task_vars:
            value, source = plain(self._templar.template(task_vars["flodl_prebuild_envelope_json"])), "fact"
        if value is None:
            path = join_root(project_root, ENVELOPE_FILE_REL)
            try:
                with open(path, encoding="utf-8") as fh:
                    return json.load(fh), f"file {path}"
            except (OSError, ValueError):
                return None, "derived target/cluster/<host>/<variant>/release/<cmd>"
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except ValueError:
                return None, "derived (the envelope given was not JSON)"
        return (dict(value) if isinstance(value, Mapping) else None), source
