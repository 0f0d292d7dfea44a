"""Controller identity (docs/launcher-contract.md §1a FLODL_INTERNAL_HOST_USER, §1c FLODL_HOST_NAME)."""
from __future__ import annotations

import sys

from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import run_for_output
from ansible_collections.flodl.cluster.plugins.module_utils._run.identity import (
    ENV_HOST_OVERRIDE,
    controller_hostname,
    controller_user,
)


class FakeRunner:
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        return self.answers.get(argv[0])


def test_override_name():
    assert ENV_HOST_OVERRIDE == "FLODL_HOST_NAME"


def test_hostname_override_wins_and_is_trimmed():
    run = FakeRunner({"hostname": "real-box\n"})
    assert controller_hostname({"FLODL_HOST_NAME": "  gpu-a \n"}, run) == "gpu-a"
    assert run.calls == []  # no need to ask the OS


def test_blank_override_falls_back_to_hostname():
    run = FakeRunner({"hostname": "  real-box\n"})
    assert controller_hostname({"FLODL_HOST_NAME": "  \t"}, run) == "real-box"
    assert run.calls == [["hostname"]]


def test_empty_override_falls_back_to_hostname():
    assert controller_hostname({"FLODL_HOST_NAME": ""}, FakeRunner({"hostname": "box"})) == "box"


def test_hostname_failure_gives_unknown_host():
    assert controller_hostname({}, FakeRunner({})) == "unknown-host"


def test_blank_hostname_output_gives_unknown_host():
    assert controller_hostname({}, FakeRunner({"hostname": " \n"})) == "unknown-host"


def test_user_from_env_trimmed():
    run = FakeRunner({"whoami": "other"})
    assert controller_user({"USER": " alice \n"}, run) == "alice"
    assert run.calls == []


def test_blank_user_falls_back_to_whoami():
    run = FakeRunner({"whoami": "bob\n"})
    assert controller_user({"USER": "   "}, run) == "bob"
    assert run.calls == [["whoami"]]


def test_missing_user_falls_back_to_whoami():
    assert controller_user({}, FakeRunner({"whoami": "carol"})) == "carol"


def test_user_is_never_invented():
    assert controller_user({}, FakeRunner({})) is None
    assert controller_user({"USER": ""}, FakeRunner({"whoami": "  \n"})) is None


def test_run_for_output_success():
    assert run_for_output([sys.executable, "-c", "print('hi')"]) == "hi\n"


def test_run_for_output_non_zero_is_none():
    assert run_for_output([sys.executable, "-c", "import sys; print('x'); sys.exit(3)"]) is None


def test_run_for_output_missing_binary_is_none():
    assert run_for_output(["/nonexistent/flodl-no-such-binary"]) is None


def test_default_runner_really_asks_hostname(monkeypatch):
    # Real `hostname` on this box, compared to what Python's own lookup says
    # only loosely: it must not be the fallback when hostname(1) exists.
    import shutil

    name = controller_hostname({}, run_for_output)
    if shutil.which("hostname"):
        assert name != "unknown-host" and name == name.strip() and name
    else:
        assert name == "unknown-host"
