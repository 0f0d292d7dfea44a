"""Every survey answer as AWX sends it (a string, possibly empty), through the one-pass validation.

Each is accepted by the reader, or refused before any host is contacted with a problem naming the field.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context

WORKERS = {
    "gpu-a": {"flodl_path": "/srv/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "eth0",
              "flodl_arch": "precompiled/cu128"},
    "gpu-b": {"flodl_path": "/srv/proj", "flodl_local_devices": [0, 1], "flodl_nccl_socket_ifname": "eth0",
              "flodl_arch": "precompiled/cu128", "ansible_host": "10.0.0.12"},
}


def task_vars(**extra):
    """Recorded task vars of cluster_train's first step on a two-worker inventory, plus extra vars."""
    tv = {
        "groups": {"all": [*WORKERS, "localhost"], "flodl_workers": list(WORKERS)},
        "hostvars": {**{k: dict(v) for k, v in WORKERS.items()}, "localhost": {}},
        "flodl_controller_host": "10.0.0.1",
        "flodl_controller_path": "/srv/proj",
        "flodl_cmd": "train",
    }
    tv.update(extra)
    for name, value in extra.items():  # extra vars reach every host's variables too
        for host in tv["hostvars"].values():
            host[name] = value
    return tv


@pytest.fixture(autouse=True)
def controller_env(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    monkeypatch.delenv("FLODL_NET_TIMEOUT_SCALE", raising=False)


SURVEY = json.loads((Path(__file__).resolve().parents[5] / "examples" / "awx" / "survey.json").read_text())
# A valid answer for questions whose default is blank.
EXAMPLES = {"flodl_cmd": "train", "flodl_fdl_env": "lab", "flodl_launch_command": "cargo run --release --bin train"}
# Answers an admin may add to the survey (docs/awx.md): per-worker and run-wide values given as extra vars.
EXTRA = [("flodl_gpu_ram_share", "0.5"), ("flodl_gpu_ram_share", ""), ("flodl_cluster_gpu_ram_share", "0.5"),
         ("flodl_cluster_gpu_ram_share", ""), ("flodl_build_host", ""), ("flodl_launch_host", ""),
         ("flodl_launch_grace_seconds", "2.5"), ("flodl_preflight_require_all", "true"),
         ("flodl_preflight_require_all", "false"), ("flodl_preflight_require_all", ""),
         ("flodl_preflight_require_all", "maybe"),
         # Answers that are no value of their type.
         ("flodl_gpu_ram_share", "half"), ("flodl_launch_grace_seconds", "soon"), ("flodl_net_timeout_scale", "x"),
         ("flodl_prebuild", "maybe")]
PHASES = ["preflight", "prebuild", "launch"]  # what cluster_train validates in its first step


def answers():
    for question in SURVEY["spec"]:
        name = question["variable"]
        yield name, str(question["default"]) if question["default"] != "" else EXAMPLES[name]
        yield name, ""
    yield from EXTRA


# Refused before contact: a blank answer to a required question with nothing to fall back on, and non-values.
REFUSED = {("flodl_cmd", ""), ("flodl_prebuild", ""),
           ("flodl_gpu_ram_share", "half"), ("flodl_launch_grace_seconds", "soon"), ("flodl_net_timeout_scale", "x"),
           ("flodl_prebuild", "maybe"), ("flodl_preflight_require_all", "maybe")}


@pytest.mark.parametrize("name,answer", list(answers()), ids=repr)
def test_every_survey_answer_as_a_string_is_accepted_or_refused_naming_the_field(name, answer):
    assert isinstance(answer, str)
    tv = task_vars(**{name: answer})
    if (name, answer) in REFUSED:
        with pytest.raises(TopologyError) as exc:
            build_context(tv, None, PHASES)
        assert exc.value.problems and all(name in problem for problem in exc.value.problems), exc.value.problems
        return
    ctx = build_context(tv, None, PHASES)
    if name == "flodl_gpu_ram_share":
        assert [w.gpu_ram_share for w in ctx.cluster.workers] == [0.5 if answer else None] * 2
    if name == "flodl_cluster_gpu_ram_share":
        assert ctx.cluster.gpu_ram_share == (0.5 if answer else None)
    if name == "flodl_build_host":
        assert ctx.build_host == "localhost"


def test_every_survey_answer_is_a_string():
    # AWX puts text and multiple-choice answers in extra vars as strings; a numeric question would not be.
    for question in SURVEY["spec"]:
        assert question["type"] in {"text", "textarea", "multiplechoice"}, question["variable"]
        assert isinstance(question["default"], str), question["variable"]
