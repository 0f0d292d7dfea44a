"""The real ActionModule of each flodl.cluster action, on real Ansible objects, fed recorded task_vars.

A case is a directory ``fixtures/<action>/<case>/`` (the layout ansible.posix uses for ``synchronize``):
``taskvars_in.json`` (what the step saw, recorded as fixtures/README.md says), ``task_in.json`` (the task's
``args`` and ``check_mode``) and ``result_out.json`` (what the result must hold: each key equal, and
``_msg_contains`` substrings of ``msg``). ``__TMP__`` in a case's files stands for a fresh temp directory.
A test module names its action in ``ACTION``; a test taking ``recorded`` runs once per case.
"""
from __future__ import annotations

import importlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play import Play
from ansible.playbook.play_context import PlayContext
from ansible.plugins.loader import connection_loader
from ansible.template import Templar
from ansible.vars.manager import VariableManager

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONTROLLER = "gpu-a"  # FLODL_HOST_NAME: the recorded cluster's worker `ctl` is this machine


@dataclass
class Case:
    task_vars: dict[str, Any]
    args: dict[str, Any]
    check_mode: bool
    expected: dict[str, Any]


def cases(action: str) -> list[str]:
    return sorted(p.name for p in (FIXTURES / action).iterdir() if (p / "taskvars_in.json").is_file())


def load_case(action: str, case: str, tmp: Path | None = None) -> Case:
    where = FIXTURES / action / case

    def read(name: str, default: Any) -> Any:
        path = where / name
        if not path.is_file():
            return default
        text = path.read_text(encoding="utf-8")
        return json.loads(text.replace("__TMP__", str(tmp)) if tmp is not None else text)

    task = read("task_in.json", {})
    return Case(read("taskvars_in.json", None), task.get("args", {}), bool(task.get("check_mode")),
                read("result_out.json", {}))


def make_action(action: str, case: Case) -> Any:
    """``flodl.cluster.<action>``'s ActionModule as the task executor builds it, on a local connection."""
    loader = DataLoader()
    play = Play.load({"name": "p", "hosts": "flodl_workers", "gather_facts": False,
                      "tasks": [{"name": "t", "meta": "noop"}]},
                     variable_manager=VariableManager(loader=loader), loader=loader)
    task = next(t for block in play.compile() for t in block.block if t.name == "t")
    task.args = dict(case.args)
    task.check_mode = case.check_mode
    play_context = PlayContext(play=play)
    connection = connection_loader.get("local", play_context)
    module = importlib.import_module(f"ansible_collections.flodl.cluster.plugins.action.{action}")
    return module.ActionModule(task, connection, play_context, loader, Templar(loader=loader, variables=case.task_vars),
                               None)


def run_case(action: str, case: Case) -> dict[str, Any]:
    return make_action(action, case).run(task_vars=case.task_vars)


def assert_expected(result: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, want in expected.items():
        if key == "_msg_contains":
            for part in want:
                assert part in result.get("msg", ""), (part, result.get("msg"))
        else:
            assert key in result, (key, sorted(result))
            assert result[key] == want, key


def pytest_generate_tests(metafunc):
    # A test asking for `recorded` runs once per case directory of its module's ACTION.
    if "recorded" in metafunc.fixturenames:
        metafunc.parametrize("case_name", cases(metafunc.module.ACTION))


@pytest.fixture
def recorded(request, case_name, tmp_path) -> Case:
    return load_case(request.module.ACTION, case_name, tmp_path)


@pytest.fixture
def case(request, tmp_path):
    """``case(name)``: one named case of the module's ACTION, ``__TMP__`` being this test's temp dir."""
    return lambda name: load_case(request.module.ACTION, name, tmp_path)


@pytest.fixture
def run(request):
    """``run(case)``: the module's ACTION run on the case; its result."""
    return lambda loaded: run_case(request.module.ACTION, loaded)


@pytest.fixture
def expect():
    return assert_expected


@pytest.fixture(autouse=True)
def controller_env(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", CONTROLLER)
    monkeypatch.delenv("FLODL_NET_TIMEOUT_SCALE", raising=False)
    monkeypatch.delenv("FDL_LIBTORCH_CASE", raising=False)


@pytest.fixture(autouse=True)
def leases(monkeypatch) -> list[tuple[Any, ...]]:
    """The local lock's lease holders the steps would start: recorded, not started (no playbook is their parent)."""
    from ansible_collections.flodl.cluster.plugins.plugin_utils._host import runlock_io

    started: list[tuple[Any, ...]] = []
    monkeypatch.setattr(runlock_io, "keep_lease", lambda *args: started.append(args))
    return started


@pytest.fixture
def no_ssh(monkeypatch):
    """Local commands run (a GPU count, the launch command); an ssh, to a worker or anywhere, fails the test."""
    real = subprocess.Popen
    started: list[Any] = []

    def only_local(argv, *args, **kwargs):
        started.append(argv)
        if Path(str(argv[0] if isinstance(argv, (list, tuple)) else argv).split()[0]).name == "ssh":
            raise AssertionError(f"ssh was started: {argv!r}")
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", only_local)
    return started


@pytest.fixture
def no_processes(monkeypatch):
    """The subprocess boundary: every ssh, probe and command goes through Popen; a refusal starts none."""
    started: list[Any] = []

    def refuse(argv, *args, **kwargs):
        started.append(argv)
        raise AssertionError(f"a process was started: {argv!r}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    return started


@pytest.fixture
def run_as():
    """``run_as(action, case)``: another action (not the module's ACTION) run on a loaded case."""
    return run_case


# An `ssh` first on PATH that runs the remote command with /bin/sh on this machine: the scripts the
# actions send (a session, a cleanup) run for real and nothing leaves it. It logs each argv to $SSH_LOG.
# FAKE_SSH=hostkey|down|hang fails every ssh as ssh would; FAKE_SSH_DOWN=<text> fails only an argv
# holding that text (one worker down); FAKE_SSH_NOPKILL=<text> runs that one without procps on PATH.
STAND_IN_SSH = """#!/bin/sh
echo "$*" >> "$SSH_LOG"
case "$FAKE_SSH" in
  hostkey) echo "Host key verification failed." >&2; exit 255 ;;
  down) echo "ssh: connect to host 192.0.2.12 port 22: No route to host" >&2; exit 255 ;;
  hang) exec sleep 30 ;;
esac
if [ -n "$FAKE_SSH_DOWN" ]; then
  case "$*" in *"$FAKE_SSH_DOWN"*) echo "ssh: connect to host $FAKE_SSH_DOWN: No route to host" >&2; exit 255 ;; esac
fi
if [ -n "$FAKE_SSH_NOPKILL" ]; then
  case "$*" in *"$FAKE_SSH_NOPKILL"*) PATH=/nonexistent; export PATH ;; esac
fi
while [ "$1" != "--" ]; do shift; done
exec /bin/sh -c "$3"
"""


@pytest.fixture
def ssh_log(stand_in_on_path, monkeypatch) -> Path:
    """The stand-in ssh on PATH; the file its calls are logged to (absent: no ssh was run)."""
    for name in ("FAKE_SSH", "FAKE_SSH_DOWN", "FAKE_SSH_NOPKILL"):
        monkeypatch.delenv(name, raising=False)
    return stand_in_on_path("ssh", STAND_IN_SSH)
