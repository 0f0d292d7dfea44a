# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch plan as an operator reads it (``-v`` output and check mode)."""
from __future__ import annotations

import json
from collections.abc import Mapping

from ansible_collections.flodl.cluster.plugins.module_utils import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils.hexcodec import hex_decode


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
) -> list[str]:
    """Command, cwd, log, every added variable and the decoded topology; secrets withheld.

    ``full`` (check mode) prints long values whole; otherwise they are cut.
    """
    lines = ["flodl launch plan" + (" (check mode: nothing runs, nothing is written)" if full else "")]
    lines.append(f"  command : {plan.command}")
    lines.append(f"  cwd     : {plan.cwd}")
    lines.append(f"  log     : {log_dir}/launch-<timestamp>.log")
    if guard:
        lines.append(f"  recursion guard: {guard}")
        return lines
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
        for host, entry in sorted(json.loads(envelope_text).items()):
            lines.append(f"    {host}: {json.dumps(entry, sort_keys=True)}")
    if plan.overlay_path:
        lines.append(f"  compose overlay {plan.overlay_path}:")
        lines += [f"    {line}" for line in (plan.overlay or "").splitlines()]
    return lines
