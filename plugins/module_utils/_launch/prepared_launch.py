# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""run_launcher's inputs from a registered flodl.cluster.launch_env result (``prepared_var``).

Read as registered, the launch runs the exact command and environment launch_env rendered and measured,
with no templating between the two steps.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def prepared_args(args: Mapping[str, Any], name: str, prepared: Any) -> tuple[dict[str, Any], str | None]:
    """``args`` with the launch that ``prepared`` (registered as ``name``) holds filled in: its command, cwd, env,
    log directory and masters' directory; (the arguments, why nothing can run or None).

    Explicit ``log_dir`` and ``ssh_control_dir`` arguments win; the rest comes from the prepared launch alone.
    """
    if not isinstance(prepared, Mapping):
        return dict(args), (f"flodl launch: prepared_var `{name}` names no registered result; register the result "
                            "of flodl.cluster.launch_env under that name in an earlier task of this play")
    filled = dict(args, log_dir=args["log_dir"] or prepared.get("log_dir") or None,
                  ssh_control_dir=args["ssh_control_dir"] or prepared.get("ssh_control_dir") or None)
    if prepared.get("failed") or prepared.get("skipped"):
        return filled, (f"flodl launch: the launch prepared in `{name}` did not pass (failed or skipped), so nothing "
                        "was started; fix what that task reported and run again")
    if not prepared.get("command") or not prepared.get("cwd"):
        return filled, (f"flodl launch: `{name}` is not a result of flodl.cluster.launch_env (it has no command or "
                        "cwd); register that task's result under this name")
    # How the launch host is reached and where a detached run is recorded: as the run's reader read them.
    filled.update(command=str(prepared["command"]), chdir=str(prepared["cwd"]), env=prepared.get("env") or {},
                  forward_agent=prepared.get("forward_agent") is True, project_dir=prepared.get("project_dir") or None)
    return filled, None
