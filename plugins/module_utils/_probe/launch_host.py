# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch host as the training controller: one ssh session that checks it and holds the run lock.

With ``flodl_launch_host`` the play's own machine (under AWX a throwaway job pod) is not the
controller. Preflight opens one session to the launch host that prints, between sentinels:

- the controller's identity there (``FLODL_HOST_NAME``, else ``hostname``): exported as ``HOSTNAME``;
- the controller's data path check, and its GPU count when asked;
- the launcher's reach to every worker (module_utils._ssh.remote_launch.reach_script);
- the run lock, taken on the launch host's own filesystem.

The holder of a lock taken this way is that session's shell (its pid on the launch host): the session
stays open while ansible-playbook lives (plugin_utils._proc.lock_holder keeps its stdin open), then releases
the lock (module_utils._run.runlock.release_script). A session cut off without the release (the job's pod
deleted, the launch host's sshd killed) leaves a lock whose pid is gone: the next run takes it over,
saying so. Pure parts only.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock
from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import SHELL_TIGHTEN_UMASK
from ansible_collections.flodl.cluster.plugins.module_utils._probe import check_registry
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import Armed, Ask
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts
from ansible_collections.flodl.cluster.plugins.module_utils._probe.gpu_count import parse_gpu_counts
from ansible_collections.flodl.cluster.plugins.module_utils._probe.preflight_probe import parse_probe
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote

MARK_ID = "__FLODL_LH_ID__"
MARK_LOCK = "__FLODL_LOCK__"
MARK_OLD = "__FLODL_LOCK_OLD__"
MARK_AGE = "__FLODL_LOCK_AGE__"
MARK_WHY = "__FLODL_LOCK_WHY__"
MARK_END = "__FLODL_LH_END__"
_SAFE = "A-Za-z0-9._-"

# The controller's identity there: FLODL_HOST_NAME, else hostname (module_utils._run.identity, in sh).
_WHO = (
    "i=$(printf '%s' \"${FLODL_HOST_NAME:-}\" | sed 's/^[[:space:]]*//;s/[[:space:]]*$//' | head -n 1); "
    '[ -n "$i" ] || i=$(hostname 2>/dev/null); [ -n "$i" ] || i=unknown-host'
)
_IDENTITY = f'{_WHO}; printf "{MARK_ID}=%s\\n" "$i" | head -n 1'
# The pid namespace of this boot: a pid recorded elsewhere (another machine, container or boot) is not checked.
_SPACE = ("sp=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null | tr -cd '0-9a-f-'):"
          "$(readlink /proc/self/ns/pid 2>/dev/null | tr -cd '0-9'); case \"$sp\" in :*|*:) sp=;; esac")


_NUM = "\\([0-9][0-9]*\\)"
# What the lock step reads of the lock there: (sh variable, JSON key, sed group).
_FIELDS = (
    ("pid", "pid", _NUM),
    ("hh", "controller_host", f'"\\([{runlock.SAFE_CHARS}]*\\)"'),
    ("osp", "space", '"\\([0-9a-f:-]*\\)"'),
    ("ops", "pid_start", '"\\([0-9]*\\)"'),
    ("ottl", "ttl", _NUM),
)


def _pid_start(pid: str) -> str:
    """sh: the start time of process ``pid`` (field 22 of its stat), empty when it is gone."""
    return f"$(sed 's/.*) //' /proc/{pid}/stat 2>/dev/null | cut -d' ' -f20)"


def _lock_function(project_dir: str, run_id: str, ttl: int, origin: str | None) -> str:
    """``flodl_lock``: take the lock exclusively (a hard link), or report who holds it, or take a lapsed one over.

    The lease's age is the lock's mtime against the mtime of the file just written beside it: one file
    system's clock, whatever the clocks of the machines that wrote them.
    """
    p = always_quote(project_dir.rstrip("/") or "/")
    head = {"format": runlock.FORMAT, "project": project_dir, "run_id": run_id, "ttl": int(ttl)}
    if origin:
        head["origin"] = origin
    prefix = always_quote(json.dumps(head)[:-1])
    fields = "; ".join(f"{var}=$(rd | sed -n {runlock.field_sed(key, pattern)})" for var, key, pattern in _FIELDS)
    say = "flodl_say "
    return "\n".join([
        f"flodl_say() {{ __flodl_state=$1; echo {MARK_LOCK}=$1; }}",
        f"rd() {{ head -c {runlock.MAX_LOCK_BYTES} \"$f\" 2>/dev/null | tr -d '\\n'; }}",
        "flodl_lock() {",
        # The lock (and target/cluster when it is made here) never group- or world-writable.
        f"  {SHELL_TIGHTEN_UMASK}",
        f"  p={p}; d=\"$p/target/cluster\"; f=\"$d/run.lock\"",
        f"  {_WHO}; h=$(printf '%s' \"$i\" | tr -c '{runlock.SAFE_CHARS}' _); {_SPACE}",
        f"  u=$(id -un 2>/dev/null); case \"$u\" in ''|*[!{_SAFE}]*) u=unknown;; esac",
        f"  [ -d \"$p\" ] || {{ {say}noproject; return; }}",
        f"  mkdir -p \"$d\" 2>/dev/null || {{ {say}unwritable; return; }}",
        # Never through a link out of the project (<project>/target -> elsewhere).
        f"  r=$(cd -P \"$p\" && pwd) && t=$(cd -P \"$d\" && pwd) || {{ {say}unwritable; return; }}",
        f"  case \"$t\" in \"$r\"/*) ;; *) {say}outside; return;; esac",
        "  tmp=\"$d/.run.lock.$$\"",
        f"  printf '%s,\"controller_host\":\"%s\",\"user\":\"%s\",\"pid\":%s,\"pid_start\":\"%s\",\"space\":\"%s\","
        f"\"started\":%s}}\\n' {prefix} \"$h\" \"$u\" \"$$\" \"{_pid_start('$$')}\" \"$sp\" \"$(date +%s)\" "
        ">\"$tmp\" 2>/dev/null || { rm -f \"$tmp\"; " + say + "unwritable; return; }",
        f"  if ln \"$tmp\" \"$f\" 2>/dev/null; then rm -f \"$tmp\"; {say}taken; return; fi",
        "  old=; pid=; rid=; hh=; osp=; ops=; ottl=",
        "  if [ -f \"$f\" ] && [ ! -L \"$f\" ]; then",
        f"    old=$(head -c {runlock.MAX_LOCK_BYTES + 1} \"$f\" 2>/dev/null | od -An -v -tx1 | tr -d ' \\n')",
        f"    {fields}; rid=$(rd | sed -n {runlock.RUN_ID_SED})",
        "  elif [ -d \"$f\" ] && [ ! -L \"$f\" ]; then",
        f"    rm -f \"$tmp\"; {say}unwritable; return",
        "  fi",
        f"  echo {MARK_OLD}=\"$old\"",
        f"  if [ -n \"$rid\" ] && [ \"$rid\" = {run_id} ]; then rm -f \"$tmp\"; {say}ours; return; fi",
        # Not a lock record: replaced. The holder's pid, where it can be checked; then the lease's age.
        "  why=; if [ -z \"$rid\" ] || [ -z \"$hh\" ]; then why=garbage",
        "  elif [ \"$hh\" = \"$h\" ] && [ -n \"$sp\" ] && [ \"$osp\" = \"$sp\" ] && [ -n \"$ops\" ] "
        f"&& [ \"{_pid_start('$pid')}\" != \"$ops\" ]; then why=gone",
        "  else",
        "    now=$(stat -c %Y \"$tmp\" 2>/dev/null || date -r \"$tmp\" +%s 2>/dev/null)",
        "    mt=$(stat -c %Y \"$f\" 2>/dev/null || date -r \"$f\" +%s 2>/dev/null)",
        f"    if [ -n \"$now\" ] && [ -n \"$mt\" ]; then echo {MARK_AGE}=$((now - mt)); "
        f"[ $((now - mt)) -gt \"${{ottl:-{runlock.DEFAULT_TTL}}}\" ] && why=expired; fi",
        "  fi",
        f"  if [ -z \"$why\" ]; then rm -f \"$tmp\"; {say}held; return; fi",
        f"  echo {MARK_WHY}=$why",
        f"  mv -f \"$tmp\" \"$f\" 2>/dev/null && {say}stale && return",
        f"  rm -f \"$tmp\"; {say}unwritable",
        "}",
    ])


def session_script(
    project_dir: str,
    *,
    data_path: str,
    reach: str | None,
    gpus: bool,
    run_id: str | None,
    checks: Sequence[Armed] = (),
    ttl: int = runlock.DEFAULT_TTL,
    origin: str | None = None,
) -> str:
    """The launch host's whole session (POSIX sh). ``run_id`` None: no lock (check mode, ``flodl_run_lock=false``).

    After the end sentinel a session that took the lock renews its lease every ttl/6 s until its stdin
    closes, then releases it. ``origin``: the machine that runs ansible-playbook, recorded in the lock.
    ``checks``: the armed probe checks of the data path, the workers' parts (module_utils._probe.check_registry).
    """
    parts = ["__flodl_state="]
    held = ""
    if run_id is not None:
        # First, so a refusal never waits for the checks; the holder is this shell ($$).
        parts += [_lock_function(project_dir, run_id, ttl, origin), "flodl_lock"]
        # Stdout ends with the end sentinel; the release follows the close of stdin (ansible-playbook ended).
        renew = (f"( while kill -0 $$ 2>/dev/null; do sleep {runlock.renew_seconds(ttl)}; "
                 f"{runlock.renew_script(project_dir, run_id)}; done ) </dev/null & __flodl_renew=$!; ")
        held = (f"\nif [ \"$__flodl_state\" = taken ] || [ \"$__flodl_state\" = stale ]; then "
                f"exec >/dev/null 2>&1; {renew}cat >/dev/null; kill $__flodl_renew 2>/dev/null; "
                f"{runlock.release_script(project_dir, run_id)}; fi")
    # The parts the workers' probe runs too, asked the same way (module_utils._probe.check_registry); the reach's
    # lines carry marks of their own, which end the GPU count's section.
    parts += [_IDENTITY, *check_registry.scripts(Ask(data_path=data_path, gpus=gpus), checks)]
    if reach:
        parts.append(reach)
    parts.append(f"echo {MARK_END}")
    return "\n".join(parts) + held


@dataclass
class SessionFacts:
    """What the launch host's session printed; None for what it did not say."""

    identity: str | None = None
    dir_ok: bool | None = None
    read_ok: bool | None = None
    answers: dict[str, Any] = field(default_factory=dict)  # the probe checks' answers (parse_probe's)
    gpus: GpuCounts | None = None
    lock_state: str | None = None
    old_lock: bytes | None = None
    lock_age: int | None = None
    lock_why: str | None = None
    complete: bool = False


def _gpus(section: str | None) -> GpuCounts | None:
    try:
        return parse_gpu_counts(section) if section is not None else None
    except ValueError:
        return None


def parse_session(stdout: str) -> SessionFacts:
    """The facts, from exact sentinel lines only (nothing else the shell printed can fake one)."""
    shared = parse_probe(stdout or "")  # the parts the workers run too, read by the same parser
    facts = SessionFacts(dir_ok=shared.dir_ok, read_ok=shared.read_ok, answers=shared.answers,
                         gpus=_gpus(shared.gpus))
    for raw in (stdout or "").splitlines():
        line = raw.strip()
        name, sep, value = line.partition("=")
        if not sep:
            facts.complete = facts.complete or line == MARK_END
            continue
        if name == MARK_ID and value and all(32 <= ord(ch) < 127 for ch in value):
            facts.identity = value[:255]
        elif name == MARK_LOCK:
            facts.lock_state = value
        elif name == MARK_AGE and value.lstrip("-").isdigit():
            facts.lock_age = int(value)
        elif name == MARK_WHY and value in ("garbage", "gone", "expired"):
            facts.lock_why = value
        elif name == MARK_OLD:
            try:
                facts.old_lock = bytes.fromhex(value) if value else None
            except ValueError:
                facts.old_lock = None
    return facts


def lock_outcome(host: str, project_dir: str, facts: SessionFacts, inventory_hint: str = "<inventory>",
                 this_run: str | None = None) -> tuple[str | None, str | None]:
    """(error, warning) of the lock step on launch host ``host``: a refusal naming both runs, a takeover, or neither."""
    path = f"{host}:{runlock.lock_path(project_dir)}"
    state = facts.lock_state
    old, problem = runlock.parse_lock(facts.old_lock) if facts.old_lock is not None else (None, None)
    if state in ("taken", "ours"):
        return None, None
    if state == "stale":
        if old is not None and facts.lock_why == "expired":
            why = (f"the lease of its holder, pid {old.pid} on {old.controller_host} (run id {old.run_id}), lapsed: "
                   f"not renewed for {facts.lock_age} s, over its {old.lease} s (that run was killed or cut off)")
        elif old is not None:
            why = f"its holder, pid {old.pid} on {old.controller_host} (run id {old.run_id}), is gone"
        else:
            why = problem or "it was not a regular file"
        return None, f"run lock {path}: {why}; the lock was taken over for this run"
    if state == "held":
        if old is not None:
            return runlock.refusal_message(project_dir, {}, old, inventory_hint=inventory_hint, this_run=this_run,
                                           lease_age=facts.lock_age), None
        return (f"flodl run lock: the run lock {path} is held by a live run ({problem}); stop that run "
                f"(`ansible-playbook flodl.cluster.teardown -i {inventory_hint}`) or, to replace it on purpose, "
                f"run again with `-e {runlock.OVERRIDE_VARIABLE}=false`."), None
    why = {
        "noproject": f"the project directory {project_dir} does not exist there, and the launch runs in it; "
                     "mount or check out the project at the same path on the launch host",
        "unwritable": f"{runlock.lock_path(project_dir)} cannot be created or replaced there (permissions, "
                      "a directory in its place, or a full disk); fix it for the launch host's ssh user",
        "outside": f"{project_dir}/target/cluster resolves outside the project there (a symbolic link); "
                   "remove the link",
    }.get(state or "", "the lock step printed no answer (the session ended early)")
    return (f"launch host {host}: the run lock was not taken: {why}. Without it a second job could start "
            "on the same hosts and kill this run's ranks."), None


def reachable_problem(host: str, target: str, host_key: str | None, why: str) -> str:
    """The preflight error when the launch host's own session failed (a host key, or no connection)."""
    if host_key == "revoked":
        return (f"launch host {host}: ssh host-key verification failed: the host key {target} presented is "
                "marked @revoked in known_hosts, and ssh refuses it whatever StrictHostKeyChecking says. The "
                "launcher runs there and the launch would fail after every build. Fix: give the launch host new "
                "host keys (`ssh-keygen -A` after removing the old ones), verify the new key out of band and "
                "record it; keep the @revoked line.")
    if host_key == "changed":
        what = f"the host key {target} presented differs from the one in known_hosts (a reinstall, or someone in the middle)"
    elif host_key == "unknown":
        what = f"no host key for {target} is in known_hosts and its check is strict"
    else:
        return (f"launch host {host}: could not open its session ({why}); the run lock, the controller's checks "
                "and the launch all happen there, so the run would fail after every build. Make it reachable "
                "with the same ssh settings Ansible uses for it.")
    return (f"launch host {host}: ssh host-key verification failed: {what}. The launcher runs there and the "
            "launch would fail after every build. Fix: verify the key out of band and record it "
            f"(`ssh-keyscan -H {always_quote(target)} >> ~/.ssh/known_hosts` on the job's side; under AWX in the "
            "execution environment's known_hosts or the flodl known_hosts credential).")
