"""Preflight on real namespace ssh hosts, through the installed collection.

Every test runs ``ansible-playbook flodl.cluster.preflight`` (the playbook
shipped in the collection tarball) against hosts made by
tests/harness/netns_cluster.py, and reads what an operator would read: the
exit status, each failing worker's own ``fatal:`` line, the PLAY RECAP per host,
the summary and the warnings. The
hosts' sshd logs prove how many connections preflight made.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Collection, run_ansible
from play_output import failed_in_recap as _failed_in_recap
from play_output import recap as _recap
from play_output import results as _results
from play_output import skipped_with_reason
from netns_cluster import Cluster, HostSpec

PLAYBOOK = "flodl.cluster.preflight"
X86 = os.uname().machine


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _layout(shared: Path) -> dict[str, Path]:
    """Project checkout and data dir on the shared filesystem (created before the hosts start)."""
    paths = {"proj": shared / "proj", "data": shared / "data", "h4data": shared / "h4data"}
    for p in paths.values():
        p.mkdir(exist_ok=True)
        os.chmod(p, 0o755)
    return paths


def _inventory(
    cluster: Cluster,
    tmp_path: Path,
    paths: dict[str, Path],
    *,
    group: dict[str, Any] | None = None,
    hosts: dict[str, dict[str, Any]] | None = None,
    data_path: bool = True,
) -> Path:
    host_vars: dict[str, dict[str, Any]] = {}
    for h in cluster:
        hv: dict[str, Any] = {
            "flodl_path": str(paths["proj"]),
            "flodl_local_devices": [0],
            "flodl_nccl_socket_ifname": "eth0",
            "flodl_arch": "precompiled/cu128",
        }
        if data_path:
            hv["flodl_data_path"] = str(paths["data"])
        hv.update((hosts or {}).get(h.name, {}))
        host_vars[h.name] = hv
    group_vars: dict[str, Any] = {
        "flodl_controller_host": cluster.controller_ip,
        "flodl_controller_path": str(paths["proj"]),
        "flodl_cmd": "train",
    }
    if data_path:
        group_vars["flodl_controller_data_path"] = str(paths["data"])
    group_vars.update(group or {})
    return cluster.write_inventory(tmp_path / "inventory.json", group_vars=group_vars, host_vars=host_vars)


def _play(collection: Collection, inventory: Path, *extra: str, env: dict[str, str] | None = None):
    return run_ansible(collection, ["ansible-playbook", PLAYBOOK, "-i", str(inventory), *extra], env=env)


def _failures(stdout: str) -> list[Any]:
    """Every ``fatal: [...]: FAILED! => {...}`` result in the output, parsed."""
    return list(_results(stdout).values())


def _host_failures(proc) -> dict[str, str]:
    """Each failing worker's own message, keyed by host: one fatal line per host, naming that host only."""
    fails = {host: str(r["msg"]) for host, r in _results(proc.stdout).items()}
    for host, msg in fails.items():
        assert msg.startswith(f"{host}: "), f"{host}'s failure is not its own: {msg}"
        others = [o for o in fails if o != host and re.search(rf"\b{o}\b", msg)]
        assert not others, f"{host}'s message also names {others}: {msg}"
    return fails


def _summary(stdout: str) -> dict[str, str]:
    """``h1: ok — ...`` lines printed by the preflight task."""
    out: dict[str, str] = {}
    for line in stdout.splitlines():
        m = re.match(r"^  ([A-Za-z0-9._-]+): (ok|warning|error|unreachable)\b(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2) + m.group(3)
    return out


# --------------------------------------------------------------------------
# the acceptance cluster
# --------------------------------------------------------------------------


@pytest.fixture
def cluster5(netns_cluster_factory: Callable[..., Cluster], netns_shared_dir: Path):
    paths = _layout(netns_shared_dir)
    cluster = netns_cluster_factory(
        [
            HostSpec("h1"),
            HostSpec("h2", arch_i686=True),
            HostSpec("h3", musl_ldd=True),
            HostSpec("h4", missing_paths=[str(paths["h4data"])]),
            HostSpec("h5", unreachable=True),
        ],
        shared_root=netns_shared_dir,
    )
    return cluster, paths


def test_five_hosts_each_failing_host_fails_with_its_own_message(installed_collection, cluster5, tmp_path):
    if X86 != "x86_64":
        pytest.skip("the i686 personality only exists on x86_64 machines")
    cluster, paths = cluster5
    inv = _inventory(cluster, tmp_path, paths, hosts={"h4": {"flodl_data_path": str(paths["h4data"])}})
    proc = _play(installed_collection, inv)
    assert proc.returncode != 0

    # one fatal line per failing worker, each with its own finding
    failing = _host_failures(proc)
    assert sorted(failing) == ["h2", "h3", "h4"], failing
    assert "arch mismatch" in failing["h2"] and "x86_64" in failing["h2"] and "i686" in failing["h2"]
    assert "musl" in failing["h3"]
    assert "declared data path" in failing["h4"] and str(paths["h4data"]) in failing["h4"]
    # h5 could not be probed: skipped with its own reason and a warning, not a failed host
    assert _results(proc.stdout, "UNREACHABLE") == {}
    unreachable = skipped_with_reason(proc.stdout)
    assert sorted(unreachable) == ["h5"], unreachable
    assert unreachable["h5"]["msg"].startswith("UNREACHABLE for preflight, its checks were skipped: "
                                               "h5: preflight probe could not run")
    recap = _recap(proc.stdout)
    assert sorted(recap) == ["h1", "h2", "h3", "h4", "h5"], recap
    assert _failed_in_recap(proc.stdout) == ["h2", "h3", "h4"], recap
    # h1 runs the run-once tasks: the artifact task is skipped, since the probe step returned the artifact itself
    assert recap["h1"]["failed"] == 0 and recap["h1"]["ok"] >= 1 and recap["h1"]["skipped"] == 1
    assert recap["h5"]["unreachable"] == 0 and recap["h5"]["failed"] == 0 and recap["h5"]["skipped"] == 1, recap["h5"]
    assert "ok: [h1]" in proc.stdout.split("Result of this worker", 1)[1]
    err = proc.stderr + proc.stdout
    assert "[WARNING]: h5:" in err and "[WARNING]: h1:" not in err

    summary = _summary(proc.stdout)
    assert summary["h1"].startswith("ok"), summary
    assert "x86_64" in summary["h1"] and "glibc" in summary["h1"] and f"data {paths['data']} ok" in summary["h1"]
    assert summary["h2"].startswith("error") and "i686" in summary["h2"]
    assert summary["h3"].startswith("error") and "musl" in summary["h3"]
    assert summary["h4"].startswith("error") and "missing" in summary["h4"]
    assert summary["h5"].startswith("unreachable")
    assert "[WARNING]: h5:" in proc.stderr + proc.stdout

    # one ssh round trip per reachable host, nothing built
    for name in ("h1", "h2", "h3", "h4"):
        assert cluster[name].connections() == 1, cluster[name].log()
    assert not (paths["proj"] / "target").exists()


def test_without_prebuild_abi_gate_is_skipped_data_path_kept(installed_collection, cluster5, tmp_path):
    cluster, paths = cluster5
    inv = _inventory(
        cluster,
        tmp_path,
        paths,
        group={"flodl_prebuild": False},
        hosts={"h4": {"flodl_data_path": str(paths["h4data"])}},
    )
    proc = _play(installed_collection, inv)
    assert proc.returncode != 0
    failing = _host_failures(proc)
    assert sorted(failing) == ["h4"], failing
    assert "declared data path" in failing["h4"]
    assert _failed_in_recap(proc.stdout) == ["h4"]
    summary = _summary(proc.stdout)
    assert summary["h2"].startswith("ok") and summary["h3"].startswith("ok"), summary
    assert "i686" not in summary["h2"] and "musl" not in summary["h3"]
    assert summary["h5"].startswith("unreachable")


def test_prebuild_false_as_extra_var_text(installed_collection, cluster5, tmp_path):
    """``-e flodl_prebuild=false`` arrives as a string and must still mean false."""
    cluster, paths = cluster5
    inv = _inventory(cluster, tmp_path, paths)
    proc = _play(installed_collection, inv, "-e", "flodl_prebuild=false")
    summary = _summary(proc.stdout)
    assert summary["h2"].startswith("ok") and summary["h3"].startswith("ok")
    assert _failures(proc.stdout) == [] and _failed_in_recap(proc.stdout) == []
    # h5 is unreachable, which only warns: the run succeeds.
    assert _recap(proc.stdout)["h5"]["skipped"] == 1
    assert proc.returncode == 0, proc.stdout


def test_require_all_fails_the_unreachable_worker_in_the_recap(installed_collection, cluster5, tmp_path):
    """issue 38: a standalone preflight with workers unreachable ended rc 0, nothing flagged in PLAY RECAP."""
    cluster, paths = cluster5
    inv = _inventory(cluster, tmp_path, paths)
    proc = _play(installed_collection, inv, "-e", "flodl_prebuild=false", "-e", "flodl_preflight_require_all=true")
    assert proc.returncode != 0, proc.stdout
    failing = _host_failures(proc)
    assert sorted(failing) == ["h5"], failing
    assert failing["h5"].startswith("h5: preflight probe could not run (")
    assert "flodl_preflight_require_all is true" in failing["h5"] and "make ssh to h5 work" in failing["h5"]
    assert _failed_in_recap(proc.stdout) == ["h5"]
    assert skipped_with_reason(proc.stdout) == {}
    assert _summary(proc.stdout)["h5"].startswith("error")


# --------------------------------------------------------------------------
# data paths
# --------------------------------------------------------------------------


def test_unreadable_data_path_as_non_root_is_an_error(
    installed_collection, netns_cluster_factory, netns_shared_dir, tmp_path
):
    paths = _layout(netns_shared_dir)
    locked = netns_shared_dir / "locked"
    locked.mkdir()
    cluster = netns_cluster_factory(
        [HostSpec("h1"), HostSpec("h2", unreadable_paths=[str(locked)])],
        user="flodltest",
        shared_root=netns_shared_dir,
    )
    inv = _inventory(cluster, tmp_path, paths, hosts={"h2": {"flodl_data_path": str(locked)}})
    proc = _play(installed_collection, inv)
    assert proc.returncode != 0
    failing = _host_failures(proc)
    assert sorted(failing) == ["h2"]
    assert "cannot read" in failing["h2"] and str(locked) in failing["h2"]
    assert _failed_in_recap(proc.stdout) == ["h2"]
    assert _summary(proc.stdout)["h2"].startswith("error") and "unreadable" in _summary(proc.stdout)["h2"]


def test_missing_convention_default_only_warns(installed_collection, cluster3, tmp_path, netns_shared_dir):
    if os.path.exists("/flodl/data"):
        pytest.skip("/flodl/data exists on this machine, so the convention default is not missing")
    paths = _layout(netns_shared_dir)
    inv = _inventory(cluster3, tmp_path, paths, data_path=False)
    proc = _play(installed_collection, inv)
    assert proc.returncode == 0, proc.stdout
    assert _failures(proc.stdout) == []
    summary = _summary(proc.stdout)
    for name in ("h1", "h2", "h3"):
        assert summary[name].startswith("warning") and "data /flodl/data missing" in summary[name]
    err = proc.stderr + proc.stdout
    assert "[WARNING]: h1: the convention data path /flodl/data is not present" in err


# --------------------------------------------------------------------------
# validation before any connection
# --------------------------------------------------------------------------


# One case end to end (0 logins); the others, and every refusal before contact, are unit tests
# (tests/unit/plugins/action/test_refusals_before_contact.py).
@pytest.mark.parametrize(
    ("case", "expect"),
    [
        ("reserved_env", "CUDA_VISIBLE_DEVICES"),
        # issue 35: become on a worker other than the step's own host was ignored, the ranks ran as root
        ("become_on_h2", "host h2 (worker 1): become is on for h2 (its ansible_become; become_user nobody"),
        ("become_flag", "become is on for h2 (the play's become"),
    ],
)
def test_invalid_run_fails_before_any_ssh(installed_collection, cluster3, tmp_path, netns_shared_dir, case, expect):
    paths = _layout(netns_shared_dir)
    group: dict[str, Any] = {}
    hosts: dict[str, dict[str, Any]] = {}
    env: dict[str, str] = {}
    extra: list[str] = []
    if case == "reserved_env":
        hosts = {"h2": {"flodl_env": {"CUDA_VISIBLE_DEVICES": "0"}}}
    elif case == "become_on_h2":
        hosts = {"h2": {"ansible_become": True, "ansible_become_user": "nobody"}}
    elif case == "become_flag":
        extra = ["-b"]
    elif case == "scale_var":
        group = {"flodl_net_timeout_scale": "0.05"}
    else:
        env = {"FLODL_NET_TIMEOUT_SCALE": "0.05"}
    inv = _inventory(cluster3, tmp_path, paths, group=group, hosts=hosts)
    proc = _play(installed_collection, inv, *extra, env=env)
    assert proc.returncode != 0
    failures = _results(proc.stdout)
    msg = str(failures["h2"]["msg"])
    assert expect in msg and "no host was contacted" in msg
    # each refused worker's own failure (every one for --become), naming itself
    refused = ["h1", "h2", "h3"] if case == "become_flag" else ["h2"]
    assert _failed_in_recap(proc.stdout) == refused, _recap(proc.stdout)
    for name in refused:
        assert f"host {name} (worker" in str(failures[name]["msg"]), failures[name]
    for h in cluster3:
        assert h.connections() == 0, f"{h.name} was contacted:\n{h.log()}"


# --------------------------------------------------------------------------
# GPUs, check mode, the build host, the fact for later phases
# --------------------------------------------------------------------------


def test_all_devices_without_gpu_or_a_missing_project_fails_naming_the_host(
    installed_collection, cluster3, tmp_path, netns_shared_dir
):
    paths = _layout(netns_shared_dir)
    gone = netns_shared_dir / "no-checkout"  # issue 38: h3's flodl_path is on no host; preflight said ok
    inv = _inventory(cluster3, tmp_path, paths, hosts={"h2": {"flodl_local_devices": "all"},
                                                       "h3": {"flodl_path": str(gone)}})
    proc = _play(installed_collection, inv)
    assert proc.returncode != 0
    failing = _host_failures(proc)
    assert sorted(failing) == ["h2", "h3"]
    assert "0 GPUs" in failing["h2"] and "all" in failing["h2"]
    assert f"the project path {gone} (flodl_path) on h3 is missing" in failing["h3"], failing["h3"]
    assert "set flodl_path for h3" in failing["h3"]
    assert _failed_in_recap(proc.stdout) == ["h2", "h3"]
    assert "gpus 0 nvidia / 0 amd" in _summary(proc.stdout)["h2"]
    assert _summary(proc.stdout)["h3"].startswith("error")
    assert cluster3["h2"].connections() == 1, "the GPU count rides on the same round trip"
    assert cluster3["h3"].connections() == 1, "the project check rides on the same round trip"


def test_check_mode_probes_and_reports(installed_collection, cluster3, tmp_path, netns_shared_dir):
    paths = _layout(netns_shared_dir)
    inv = _inventory(cluster3, tmp_path, paths)
    proc = _play(installed_collection, inv, "--check")
    assert proc.returncode == 0, proc.stdout
    summary = _summary(proc.stdout)
    assert [summary[n][:2] for n in ("h1", "h2", "h3")] == ["ok"] * 3, summary
    for h in cluster3:
        assert h.connections() == 1
        # The plan shows the exact probe sent to each host.
        probe_line = next(line for line in proc.stdout.splitlines() if line.strip().startswith(f"{h.name}: ssh "))
        assert h.ip in probe_line and "BatchMode=yes" in probe_line and "__FLODL_DP_DIR__" in probe_line


def test_check_mode_still_fails_on_an_error(installed_collection, cluster5, tmp_path):
    cluster, paths = cluster5
    inv = _inventory(cluster, tmp_path, paths, hosts={"h4": {"flodl_data_path": str(paths["h4data"])}})
    proc = _play(installed_collection, inv, "--check")
    assert proc.returncode != 0
    failing = _host_failures(proc)
    assert "h4" in failing and "h1" not in failing
    assert "h4" in _failed_in_recap(proc.stdout) and "h1" not in _failed_in_recap(proc.stdout)


def test_arch_is_compared_with_the_build_host(
    installed_collection, netns_cluster_factory, netns_shared_dir, tmp_path
):
    """With flodl_build_host on an i686 host, the x86_64 workers are the mismatch."""
    if X86 != "x86_64":
        pytest.skip("the i686 personality only exists on x86_64 machines")
    paths = _layout(netns_shared_dir)
    cluster = netns_cluster_factory(
        [HostSpec("h1"), HostSpec("h2", arch_i686=True), HostSpec("b1", arch_i686=True)],
        shared_root=netns_shared_dir,
    )
    inv = _inventory(cluster, tmp_path, paths, group={"flodl_build_host": "b1"})
    # b1 is in the inventory (its connection vars) but is not a worker.
    data = json.loads(inv.read_text())
    data["all"]["children"]["builders"] = {"hosts": {"b1": data["all"]["children"]["flodl_workers"]["hosts"].pop("b1")}}
    inv.write_text(json.dumps(data))
    proc = _play(installed_collection, inv)
    assert proc.returncode != 0
    failing = _host_failures(proc)
    assert sorted(failing) == ["h1"], failing
    assert _failed_in_recap(proc.stdout) == ["h1"]
    assert "b1" not in _recap(proc.stdout), "the build host is not a worker of the play"
    assert "compiles i686" in failing["h1"] and "x86_64" in failing["h1"]
    assert cluster["b1"].connections() == 1, "the build host's arch is read once, after validation"


def test_results_are_a_fact_for_later_phases(installed_collection, cluster3, tmp_path, netns_shared_dir):
    paths = _layout(netns_shared_dir)
    inv = _inventory(cluster3, tmp_path, paths, hosts={"h3": {"flodl_local_devices": "all"}})
    playbook = tmp_path / "consume.yml"
    playbook.write_text(
        "- name: Preflight on the workers\n"
        "  hosts: flodl_workers\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Preflight\n"
        "      block:\n"
        "        - name: Run the role\n"
        "          ansible.builtin.include_role:\n"
        "            name: flodl.cluster.preflight\n"
        "      rescue:\n"
        "        - name: Note the failed worker\n"
        "          ansible.builtin.debug:\n"
        "            msg: \"RESCUED={{ inventory_hostname }}\"\n"
        "- name: A later play reads the registered result\n"
        "  hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Show what the launch phase would read\n"
        "      ansible.builtin.debug:\n"
        "        msg: \"GPUS={{ hostvars['h1'].flodl_preflight_run.hosts['h3'].gpus.nvidia }},"
        "{{ hostvars['h1'].flodl_preflight_run.hosts['h3'].gpus.amd }} "
        "H1={{ hostvars['h1'].flodl_preflight_run.hosts['h1'].status }} "
        "FAILED={{ hostvars['h1'].flodl_preflight_run.failed_hosts | join(',') }} "
        "H3SEES={{ hostvars['h3'].flodl_preflight_run.failed_hosts | join(',') }}\"\n"
    )
    proc = run_ansible(installed_collection, ["ansible-playbook", str(playbook), "-i", str(inv)])
    assert proc.returncode == 0, proc.stdout
    m = re.search(r"GPUS=(\d+),(\d+) H1=(\w+) FAILED=([\w,]*) H3SEES=([\w,]*)", proc.stdout)
    assert m, proc.stdout
    assert (int(m.group(1)), int(m.group(2))) == (0, 0)
    assert m.group(3) == "ok"
    assert m.group(4) == "h3" and m.group(5) == "h3", "every worker holds the one registered result"
    assert re.findall(r"RESCUED=(\w+)", proc.stdout) == ["h3"]


def test_controller_own_worker_is_not_probed(installed_collection, cluster3, tmp_path, netns_shared_dir):
    """A worker whose host is the controller's identity is covered by the local check: no ssh."""
    paths = _layout(netns_shared_dir)
    inv = _inventory(cluster3, tmp_path, paths)
    proc = _play(installed_collection, inv, env={"FLODL_HOST_NAME": "h1"})
    assert proc.returncode == 0, proc.stdout
    summary = _summary(proc.stdout)
    assert "own box" in summary["h1"] and summary["h2"].startswith("ok")
    assert "controller h1: ok" in proc.stdout
    assert "flodl preflight (3 worker(s) of the play, build arch " in proc.stdout
    assert "h1: ok — the controller's own box, no ssh" in proc.stdout
    assert cluster3["h1"].connections() == 0
    assert cluster3["h2"].connections() == 1 and cluster3["h3"].connections() == 1


def test_missing_declared_controller_data_path_is_an_error(
    installed_collection, cluster3, tmp_path, netns_shared_dir
):
    paths = _layout(netns_shared_dir)
    gone = netns_shared_dir / "not-mounted"
    inv = _inventory(cluster3, tmp_path, paths, group={"flodl_controller_data_path": str(gone)})
    proc = _play(installed_collection, inv)
    assert proc.returncode != 0
    # The controller is not a worker: its problem stops the run, and every worker's own report says so (issue 38:
    # failing the run-once step charged the one worker it ran on, and the others were missing from PLAY RECAP).
    fails = _failures(proc.stdout)
    assert len(fails) == 3, fails
    for found in fails:
        msg = str(found["msg"])
        assert msg.startswith("the controller failed preflight, so the run stops: ")
        assert str(gone) in msg and "declared data path" in msg
    assert "Result of this worker" in proc.stdout


def test_min_free_gb_fails_a_small_data_path_and_a_small_build_target(
    installed_collection, netns_cluster_factory, tmp_path, netns_shared_dir
):
    """flodl_preflight_min_free_gb (issue 36): a 64 MiB tmpfs under h2's data path, then under h1's view of the
    project's target dir with h1 as the build host; the shared disk everywhere else."""
    paths = _layout(netns_shared_dir)
    small, target = "/tmp/flodl-small", str(paths["proj"] / "target")
    cluster = netns_cluster_factory([HostSpec("h1", small_paths=[target]), HostSpec("h2", small_paths=[small])],
                                    shared_root=netns_shared_dir)
    inv = _inventory(cluster, tmp_path, paths, hosts={"h2": {"flodl_data_path": small}})
    proc = _play(installed_collection, inv, "-e", "flodl_preflight_min_free_gb=0.5")
    assert proc.returncode != 0, proc.stdout
    fails = _host_failures(proc)
    assert list(fails) == ["h2"], fails
    assert fails["h2"].startswith(f"h2: only 0.06 GB free on the data path {small}, below "
                                  "flodl_preflight_min_free_gb (0.5 GB)") and "Fix:" in fails["h2"], fails["h2"]
    assert _recap(proc.stdout)["h1"]["failed"] == 0

    # The same run without the knob (or a blank survey answer): not checked, every worker passes.
    assert _play(installed_collection, inv, "-e", "flodl_preflight_min_free_gb=").returncode == 0

    # h1 builds: its target dir is the small one, which fails the run (every worker's report says why).
    proc = _play(installed_collection, inv, "-e", "flodl_preflight_min_free_gb=0.5", "-e", "flodl_build_host=h1",
                 "-e", json.dumps({"flodl_data_path": str(paths["data"])}))
    assert proc.returncode != 0, proc.stdout
    fails = _failures(proc.stdout)
    assert len(fails) == 2, fails
    for found in fails:
        assert str(found["msg"]).startswith("the controller failed preflight, so the run stops: build host h1: only "
                                            f"0.06 GB free on the build's target dir {target}, below "), found
