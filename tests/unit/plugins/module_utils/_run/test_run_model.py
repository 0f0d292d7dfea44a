"""A run model taken back from an earlier step's result is checked field by field: any value of the wrong shape,
a placeholder with no secret, or a redacted join token with none to put back, and it is not a model (None)."""
from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RunContext, from_model, to_model

TOKEN = "f" * 32
VAULTED = "s3cret-path"
CIPHER = "$ANSIBLE_VAULT;1.1;AES256\n6162"


def _ctx(join: bool = True) -> RunContext:
    controller = {"host": "10.0.0.1", "path": "/p", **({"join": {"token": TOKEN}} if join else {})}
    cluster = cluster_model({"controller": controller, "workers": [{"host": "gpu-b", "path": f"/{VAULTED}", "local_devices": [0]}]})
    return RunContext(cluster=cluster, controller_identity="gpu-a", prebuild=True, net_timeout_scale=None,
                      cmd="train", cmd_dir="", fdl_env=None, build_host="localhost", launch_command=None,
                      play_hosts=["gpu-b"], inventory_names={"gpu-b": "gpu-b"}, ansible_only={"gpu-b": "docker"},
                      warnings=["w"], vaulted={VAULTED: CIPHER})


def _model() -> dict[str, Any]:
    return to_model(_ctx(), ["preflight", "launch"], True, "fp")


def _back(model: Any, token: str | None = TOKEN) -> RunContext | None:
    return from_model(model, ["launch"], True, "fp", token, lambda c: [VAULTED] if c == [CIPHER] else None)


def test_the_model_holds_placeholders_and_comes_back_whole() -> None:
    model = _model()
    assert TOKEN not in str(model) and VAULTED not in str(model) and model["vaulted"] == [CIPHER]
    back = _back(model)
    assert back == _ctx() and back.vaulted == {VAULTED: CIPHER}
    assert back.cluster.controller.join is not None and back.cluster.controller.join.token == TOKEN


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set ``context.a.b`` (dots) in the model to ``value``."""
    def change(model: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        where = model
        for key in parents:
            where = where[key]
        where[last] = value
    return change


@pytest.mark.parametrize("change", [
    _set("context.cmd_dir", None),                            # a field of the wrong type
    _set("context.prebuild", "yes"),
    _set("context.connect_timeout", True),                    # a boolean is no timeout
    _set("context.play_hosts", ["gpu-b", 7]),
    _set("context.warnings", "w"),
    _set("context.ansible_only", {"gpu-b": None}),
    _set("context.ansible_only", ["gpu-b"]),
    _set("vaulted", "one"),                                   # ciphertexts not a list of text
    _set("vaulted", [CIPHER, CIPHER]),                        # more ciphertexts than plaintexts came back
    _set("vaulted", ["$ANSIBLE_VAULT;other"]),                # a ciphertext that does not decrypt
    _set("context.cmd", "<vaulted:3>"),                       # a placeholder with no secret of that index
    _set("context.settings.run_lock_ttl", True),              # a boolean is no number of seconds
    _set("context.settings.build_timeout", False),
    _set("context.settings.prebuild_env", {"A": 1}),          # an env value that is not text
    _set("context.settings.prebuild_env", "A=1"),
    _set("context.settings", None),
])
def test_a_model_with_any_field_out_of_shape_is_no_model(change) -> None:
    model = _model()
    assert _back(copy.deepcopy(model)) is not None
    change(model)
    assert _back(model) is None


def test_a_redacted_join_token_without_the_runs_token_is_no_model() -> None:
    assert _back(_model(), token=None) is None
    model = to_model(_ctx(join=False), ["launch"], True, "fp")
    back = from_model(model, ["launch"], True, "fp", None, lambda c: [VAULTED])
    assert back is not None and back.cluster.controller.join is None and "join" not in back.cluster.document["controller"]
