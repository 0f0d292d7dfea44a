"""Values that came from Ansible Vault: found as Ansible marks them, carried by ciphertext, withheld from results."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.vault import EncryptedString, VaultLib, VaultSecret, VaultSecretsContext
from ansible.template import Templar

from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RESULT_KEY
from ansible_collections.flodl.cluster.plugins.module_utils._core.vault_redact import MARK
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import context, run_handoff, vault_values

SECRET = "hunter2-from-the-vault"
WORKERS = {
    name: {"flodl_path": "/srv/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "eth0",
           "flodl_arch": "precompiled/cu128", "ansible_host": f"10.0.0.{i}"}
    for i, name in enumerate(["h1", "h2", "h3"], start=11)
}


def task_vars(**extra):
    tv = {
        "inventory_hostname": "h1",
        "ansible_play_hosts_all": list(WORKERS),
        "groups": {"all": list(WORKERS), "flodl_workers": list(WORKERS)},
        "hostvars": {k: dict(v) for k, v in WORKERS.items()},
        "flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/srv/proj", "flodl_cmd": "train",
    }
    tv.update(extra)
    return tv


@pytest.fixture
def vault(monkeypatch):
    """This process's vault secrets, as ansible-playbook sets them from --vault-password-file."""
    secrets = [("default", VaultSecret(b"test password"))]
    monkeypatch.setattr(VaultSecretsContext, "_current", VaultSecretsContext(secrets))
    vault_values.begin({})
    yield VaultLib(secrets)
    vault_values.begin({})  # no secret left for the next test's display


def encrypted(lib: VaultLib, text: str) -> EncryptedString:
    return EncryptedString(ciphertext=lib.encrypt(text).decode())


def action():
    return SimpleNamespace(_play_context=SimpleNamespace(become=False, password=None),
                           _templar=Templar(loader=DataLoader()), _task=SimpleNamespace())


def test_vaulted_values_are_found_before_and_after_templating(vault):
    value = encrypted(vault, SECRET)
    templated = Templar(loader=DataLoader()).template({"A": value, "B": "plain"})
    assert vault_values.found_in({"env": {"A": value, "B": ["plain", 3]}}, {}) == {SECRET: value._ciphertext}
    assert vault_values.found_in(templated, {}) == {SECRET: value._ciphertext}
    assert vault_values.found_in({"B": "plain", "n": None}, {}) == {}
    # The views of other hosts' variables are not walked from a task's own (each host's are read on their own).
    assert vault_values.in_task_vars({"hostvars": {"h2": {"x": value}}, "top": value}) == {SECRET: value._ciphertext}
    assert vault_values.in_task_vars({"hostvars": {"h2": {"x": value}}}) == {}
    # A delegated task's: the delegated host's own variables are scanned, not its views of every other host.
    delegated = {"ansible_delegated_vars": {"localhost": {"env": {"T": value}, "hostvars": Exploding()}}}
    assert vault_values.in_task_vars(delegated) == {SECRET: value._ciphertext}


class Exploding(dict):
    """A view that must not be walked (Ansible renders every host's variables to iterate it)."""

    def values(self):
        raise AssertionError("a view of every host's variables was walked")

    def __iter__(self):
        raise AssertionError("a view of every host's variables was walked")


def test_ciphertexts_decrypt_with_this_runs_secrets_only(vault):
    ciphertext = vault.encrypt(SECRET).decode()
    assert vault_values.decrypted([ciphertext]) == [SECRET]
    other = VaultLib([("default", VaultSecret(b"another password"))]).encrypt("x").decode()
    assert vault_values.decrypted([ciphertext, other]) is None
    assert vault_values.decrypted(["not a vault"]) is None


def test_the_model_travels_with_placeholders_and_later_steps_get_the_real_value(vault, monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    monkeypatch.setattr(context, "AnsibleConnections", _Connections)
    tv = task_vars(flodl_cluster_env={"TOKEN": encrypted(vault, SECRET), "PLAIN": "1"})
    tv["hostvars"]["h2"]["flodl_env"] = {"W": encrypted(vault, "worker-" + SECRET)}
    ctx = context.read_run(action(), tv, ["preflight", "prebuild", "launch"])
    assert ctx.cluster.env["TOKEN"] == SECRET and ctx.cluster.workers[1].env["W"] == "worker-" + SECRET
    assert sorted(ctx.vaulted) == [SECRET, "worker-" + SECRET]
    result = run_handoff.fields(ctx)
    model = result[RESULT_KEY]
    assert SECRET not in json.dumps(model)
    assert model["context"]["cluster"]["env"]["TOKEN"] == "<vaulted:0>"
    assert model["vaulted"] == [ctx.vaulted[SECRET], ctx.vaulted["worker-" + SECRET]]
    tv["flodl_preflight_run"] = vault_values.withheld(dict(result))
    later = context.read_run(action(), tv, ["launch"])
    assert later.trace["source"] == "flodl_preflight_run"
    assert later.cluster == ctx.cluster and later.vaulted == ctx.vaulted
    # A model whose ciphertexts this run cannot decrypt is not taken: the step reads the run itself.
    monkeypatch.setattr(vault_values, "decrypted", lambda _c: None)
    assert context.read_run(action(), tv, ["launch"]).trace["source"] == "built"


class _Connections:
    def __init__(self, *_args):
        pass

    def resolve(self, host_vars):
        from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import ResolvedConnection
        return ResolvedConnection(connection="ssh", host=host_vars["ansible_host"])


def test_a_result_is_withheld_but_what_a_later_step_runs_stays_whole_under_no_log(vault):
    vault_values.add({SECRET: "$ANSIBLE_VAULT;1.1;AES256\n3031"})
    result = {"msg": f"env {SECRET}", "env": {"TOKEN": SECRET}, "command": "train", "vaulted": ["ct " + SECRET],
              RESULT_KEY: {"context": {"x": SECRET}, "vaulted": ["ct " + SECRET]}}
    out = vault_values.withheld(result, keep=("env", "command"))
    assert out["msg"] == f"env {MARK}" and out["env"] == {"TOKEN": SECRET} and out["_ansible_no_log"] is True
    assert out["vaulted"] == result["vaulted"] and out[RESULT_KEY]["vaulted"] == result["vaulted"]  # ciphertexts
    assert out[RESULT_KEY]["context"] == {"x": MARK}
    plain = vault_values.withheld({"env": {"A": "1"}, "msg": SECRET}, keep=("env",))
    assert plain == {"env": {"A": "1"}, "msg": MARK}  # nothing kept holds a secret: callbacks see the result
    vault_values.begin({})
    assert vault_values.withheld(result) is result


def test_the_display_withholds_the_steps_secrets(vault):
    shown = []
    inner = SimpleNamespace(display=lambda m, **_k: shown.append(m), warning=lambda m, **_k: shown.append(m),
                            v=shown.append, vv=shown.append, vvv=shown.append, vvvv=shown.append, verbosity=2)
    display = vault_values.RedactingDisplay(inner)
    vault_values.begin({"flodl_cluster_env": {"T": encrypted(vault, SECRET)}})
    for say in (display.display, display.warning, display.v, display.vv, display.vvv, display.vvvv):
        say(f"rank prints {SECRET}")
    assert shown == [f"rank prints {MARK}"] * 6 and display.verbosity == 2
    assert vault_values.step_secrets() == [SECRET] and len(vault_values.ciphertexts()) == 1


def test_an_action_run_starts_with_the_task_vars_secrets_and_returns_its_result_withheld(vault):
    class Step:
        @vault_values.withholding(keep=("env",))
        def run(self, tmp=None, task_vars=None):
            return {"env": {"T": SECRET}, "msg": SECRET}

    out = Step().run(task_vars={"flodl_cluster_env": {"T": encrypted(vault, SECRET)}})
    assert out == {"env": {"T": SECRET}, "msg": MARK, "_ansible_no_log": True}
    assert Step().run(task_vars={}) == {"env": {"T": SECRET}, "msg": SECRET}  # nothing vaulted: as it was


def test_ciphertexts_named_by_an_earlier_step_are_added(vault):
    vault_values.add_ciphertexts([vault.encrypt(SECRET).decode(), 3])
    assert vault_values.step_secrets() == [SECRET]
    vault_values.add_ciphertexts(None)
    assert vault_values.step_secrets() == [SECRET]
