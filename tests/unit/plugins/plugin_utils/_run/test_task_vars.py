"""Reading task variables: registered results as they are, templated variables as the task sees them."""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import plain, registered, registered_at, var


class AnsibleOwnObject:
    """Stands for what Ansible 2.19 puts in a registered result (a warning summary): not JSON."""


class RecordingTemplar:
    def __init__(self) -> None:
        self.calls = 0

    def template(self, value):
        self.calls += 1
        return value


def test_registered_result_is_read_as_it_is_without_templating():
    task_vars = {"flodl_prebuild_run": {"per_host": {"h1": {"cmd": "echo {{ not_a_template }}"}}}}
    assert registered(task_vars, "flodl_prebuild_run") == {"per_host": {"h1": {"cmd": "echo {{ not_a_template }}"}}}


def test_registered_result_with_ansible_objects_reads_them_as_none():
    task_vars = {"flodl_preflight_run": {"warnings": [AnsibleOwnObject()], "ssh_control_dir": "/tmp/flodl-ssh-x"}}
    assert registered(task_vars, "flodl_preflight_run") == {"warnings": [None], "ssh_control_dir": "/tmp/flodl-ssh-x"}


def test_registered_result_absent_gives_the_default():
    assert registered({}, "flodl_prebuild_run") is None
    assert registered({}, "flodl_prebuild_run", {}) == {}


def test_var_is_templated_once_and_plain():
    templar = RecordingTemplar()
    assert var({"flodl_cmd": ("train",)}, templar, "flodl_cmd") == ["train"]
    assert templar.calls == 1
    assert var({}, templar, "flodl_cmd", "dflt") == "dflt" and templar.calls == 1
    assert plain({"a": (1, 2)}) == {"a": [1, 2]}


class Untouchable(dict):
    """A registered entry that fails when anything reads it (copies, iterates or looks into it)."""

    def _refuse(self, *_args, **_kwargs):
        raise AssertionError("another entry was read")

    __getitem__ = __iter__ = __len__ = __contains__ = items = keys = values = get = _refuse


def test_registered_at_copies_only_the_entry_it_names():
    agents = {"h1": {"env": {"A": "1"}, "note": [AnsibleOwnObject()]}, "h2": Untouchable(x=1)}
    task_vars = {"flodl_launch_env": {"walk_in": {"run_id": "r", "agents": agents}}}
    own = registered_at(task_vars, "flodl_launch_env", "walk_in", "agents", "h1")
    assert own == {"env": {"A": "1"}, "note": [None]}
    assert registered_at(task_vars, "flodl_launch_env", "walk_in", "run_id") == "r"
    assert registered_at(task_vars, "flodl_launch_env", "walk_in", "agents", "h9") is None
    assert registered_at(task_vars, "flodl_launch_env", "walk_in", "run_id", "deeper", default={}) == {}
    assert registered_at({}, "flodl_launch_env", "walk_in", default=0) == 0
