"""The netns test cluster itself, proven over real ssh (and once through Ansible)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
HARNESS = HERE.parent / "harness" / "netns_cluster.py"
if str(HARNESS.parent) not in sys.path:
    sys.path.insert(0, str(HARNESS.parent))

from netns_cluster import RUN_DIR, Cluster, HostSpec, subnet_span  # noqa: E402

USER = "flodltest"


def _integration_conftest(request: pytest.FixtureRequest):
    """tests/integration/conftest.py as loaded by pytest (``conftest`` is not a unique module name)."""
    target = str(HERE / "conftest.py")
    for plugin in request.config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) == target:
            return plugin
    raise LookupError(target)


def _ssh_all(cluster: Cluster, command: str) -> dict[str, subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(max_workers=len(cluster.hosts)) as pool:
        futures = {h.name: pool.submit(cluster.ssh, h, command) for h in cluster.hosts}
        return {name: f.result() for name, f in futures.items()}


def _leftovers(k: int, hosts) -> list[str]:
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    found += [line for line in netns.splitlines() if line.startswith(f"fl{k}-")]
    links = os.listdir("/sys/class/net")
    found += [name for name in links if name == f"flbr{k}" or name.startswith(f"fv{k}-")]
    for h in hosts:
        for pid, start in ((h.pid, h.pid_start), (h.init_pid, h.init_start)):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except (OSError, TypeError):
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            # a zombie is not running; it is only waiting for its (non-reaping) parent
            if int(fields[19]) == start and fields[0] not in ("Z", "X"):
                found.append(f"process {pid} of {h.name}")
    if (RUN_DIR / f"c{k}").exists():
        found.append(str(RUN_DIR / f"c{k}"))
    if (RUN_DIR / f"net{k}.json").exists():
        found.append(str(RUN_DIR / f"net{k}.json"))
    return found


def test_hosts_have_own_name_and_address(cluster3: Cluster) -> None:
    out = _ssh_all(cluster3, "hostname; ip -4 -o addr show dev eth0")
    for h in cluster3.hosts:
        r = out[h.name]
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == h.name
        assert f"inet {h.ip}/24" in r.stdout
        for other in cluster3.hosts:
            if other is not h:
                assert f"inet {other.ip}/" not in r.stdout
    assert cluster3.controller_ip.endswith(".1")
    assert len({h.ip for h in cluster3.hosts}) == 3


def test_hosts_reach_each_other_and_the_controller(cluster3: Cluster) -> None:
    h1, h2, h3 = cluster3.hosts
    r = cluster3.ssh(h1, f"ip route get {cluster3.controller_ip} && ip route get {h2.ip} && "
                         f"exec 3<>/dev/tcp/{h3.ip}/22 && head -c 7 <&3")
    assert r.returncode == 0, r.stderr
    assert "SSH-2.0" in r.stdout


def test_private_tmp_and_root_shared_rest(cluster3: Cluster) -> None:
    h1, h2 = cluster3.hosts[:2]
    shared = cluster3.shared_root()
    assert not str(shared).startswith("/tmp")
    marker = f"flodl-marker-{os.getpid()}"
    r = cluster3.ssh(h1, f"echo one > /tmp/{marker} && echo shared > {shared}/from-h1 && ls -A /root")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [".ssh"]  # private /root, not the machine's
    assert not Path(f"/tmp/{marker}").exists()
    r = cluster3.ssh(h2, f"test ! -e /tmp/{marker} && cat {shared}/from-h1 && stat -c %a /tmp")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["shared", "1777"]
    assert (shared / "from-h1").read_text() == "shared\n"


def test_no_connection_until_a_test_connects(cluster3: Cluster) -> None:
    assert all(h.connections() == 0 for h in cluster3.hosts), [h.log() for h in cluster3.hosts]
    assert "Server listening on" in cluster3.hosts[0].log()
    assert cluster3.ssh("h2", "true").returncode == 0
    assert [h.connections() for h in cluster3.hosts] == [0, 1, 0]


def test_quirks(netns_cluster_factory, netns_shared_dir: Path) -> None:
    data = netns_shared_dir / "data"
    (data / "mnist").mkdir(parents=True)
    (data / "mnist" / "train.bin").write_text("x")
    (data / "other").mkdir()
    (data / "other" / "keep.txt").write_text("kept\n")
    (data / "top.txt").write_text("top\n")
    (data / ".hidden").write_text("dot\n")
    os.symlink("other", data / "link")
    gone_deep = netns_shared_dir / "later" / "deeper" / "path"  # absent at start, created afterwards
    secret = netns_shared_dir / "secret"
    secret.mkdir()
    (secret / "key").write_text("s")
    os.chmod(netns_shared_dir, 0o755)
    for p in (data, data / "other", secret):
        os.chmod(p, 0o777)

    cluster = netns_cluster_factory(
        [
            HostSpec("h1", arch_i686=True),
            HostSpec("h2", musl_ldd=True),
            HostSpec("h3", no_pkill=True),
            HostSpec("h4", missing_paths=[str(data / "mnist"), str(gone_deep)]),
            HostSpec("h5", unreadable_paths=[str(secret)]),
            HostSpec("h6"),
        ],
        user=USER,
        shared_root=netns_shared_dir,
    )
    out = _ssh_all(cluster, "id -un; uname -m; ldd --version; echo ldd=$?; command -v pkill; echo pkill=$?")
    for name, r in out.items():
        assert r.stdout.splitlines()[0] == USER, (name, r.stdout, r.stderr)
    assert out["h1"].stdout.splitlines()[1] == "i686"
    assert all(out[n].stdout.splitlines()[1] == "x86_64" for n in ("h2", "h3", "h6"))
    # musl: banner on stderr and exit 1; glibc elsewhere
    assert "musl libc" in out["h2"].stderr and "ldd=1" in out["h2"].stdout
    assert "GLIBC" in out["h6"].stdout and "ldd=0" in out["h6"].stdout
    assert "pkill=1" in out["h3"].stdout and "pkill=0" in out["h6"].stdout
    assert "/usr/bin/pkill" in out["h6"].stdout
    assert cluster.ssh("h3", "pgrep -x sshd >/dev/null && echo pgrep-ok").stdout.strip() == "pgrep-ok"

    # missing path: absent on h4 only; its siblings are still the shared ones
    gone_deep.mkdir(parents=True)
    r = cluster.ssh("h4", f"test -e {data}/mnist; echo mnist=$?; test -e {gone_deep}; echo deep=$?; "
                          f"cat {data}/other/keep.txt {data}/top.txt {data}/.hidden {data}/link/keep.txt; "
                          f"echo from-h4 > {data}/other/new.txt")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["mnist=1", "deep=1", "kept", "top", "dot", "kept"]
    assert (data / "other" / "new.txt").read_text() == "from-h4\n"
    r = cluster.ssh("h6", f"test -e {data}/mnist/train.bin && test -e {gone_deep} && echo present")
    assert r.stdout.strip() == "present", r.stderr

    # unreadable path: the non-root user cannot list it on h5, root can; elsewhere both can
    r = cluster.ssh("h5", f"ls {secret}")
    assert r.returncode != 0 and "Permission denied" in r.stderr
    r = cluster.ssh("h5", f"ls -A {secret} && echo root-ok", user="root")
    assert r.returncode == 0 and "root-ok" in r.stdout, r.stderr
    r = cluster.ssh("h6", f"cat {secret}/key")
    assert r.returncode == 0 and r.stdout == "s", r.stderr


def test_unreachable_host_fails_fast(netns_cluster_factory) -> None:
    cluster = netns_cluster_factory(["h1", HostSpec("h2", unreachable=True)])
    h2 = cluster.host("h2")
    assert h2.pid is None and h2.ip.endswith(".12")
    t0 = time.monotonic()
    r = cluster.ssh(h2, "true", extra_options=["ConnectTimeout=5"])
    elapsed = time.monotonic() - t0
    assert r.returncode == 255
    assert "No route to host" in r.stderr or "timed out" in r.stderr, r.stderr
    assert elapsed < 4.5, elapsed
    assert cluster.ssh("h1", "true").returncode == 0


def test_teardown_leaves_nothing(netns_cluster_factory) -> None:
    cluster = netns_cluster_factory(["h1", "h2", HostSpec("h3", no_pkill=True)])
    shared = cluster.shared_root()
    k, hosts = cluster.k, list(cluster.hosts)
    assert cluster.ssh("h1", "sleep 300 >/dev/null 2>&1 & setsid sleep 301 >/dev/null 2>&1 & echo ok").stdout.strip() == "ok"
    assert (cluster.state_dir / "cluster.json").exists()
    assert _leftovers(k, hosts)  # sanity: the checker sees a live cluster
    cluster.down()
    assert _leftovers(k, hosts) == []
    assert not shared.exists()
    assert not (cluster.state_dir / "cluster.json").exists()
    cluster.down()  # idempotent


def test_cli_up_and_down_from_other_processes(tmp_path: Path) -> None:
    from fixtures_netns import _need_netns

    _need_netns()
    state = tmp_path / "state"
    inv = tmp_path / "inventory.yml"
    up = subprocess.run(
        [sys.executable, str(HARNESS), "up", "--hosts", "a1,a2", "--quirk", "a2:arch_i686",
         "--state", str(state), "--inventory", str(inv)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "a2" in up.stdout and "arch_i686" in up.stdout
        cluster = Cluster.load(state)
        assert cluster.ssh("a2", "hostname; uname -m").stdout.split() == ["a2", "i686"]
        doc = json.loads(inv.read_text())
        assert list(doc["all"]["children"]["flodl_workers"]["hosts"]) == ["a1", "a2"]
    finally:
        down = subprocess.run([sys.executable, str(HARNESS), "down", "--state", str(state)],
                              capture_output=True, text=True, timeout=60, check=False)
    assert down.returncode == 0, down.stdout + down.stderr
    assert _leftovers(cluster.k, cluster.hosts) == []


def test_a_cluster_over_244_hosts_spans_an_aligned_block_of_24s() -> None:
    # hosts from .11 up, the block's broadcast address excluded: 244 in a /24, 500 in a /23 (scale_bench.py)
    assert [subnet_span(n) for n in (1, 244, 245, 500, 501, 1012)] == [1, 1, 2, 2, 4, 4]
    c = Cluster([HostSpec(f"h{i}") for i in range(500)], "/nonexistent")
    assert (c.span, c.prefix) == (2, 23)


def test_parallel_clusters_get_distinct_subnets(netns_cluster_factory) -> None:
    a = netns_cluster_factory(["h1", "h2"])
    b = netns_cluster_factory(["h1", "h2"])
    assert a.k != b.k and a.controller_ip != b.controller_ip
    assert a.ssh("h1", "hostname").stdout.strip() == "h1"
    assert b.ssh("h2", "hostname").stdout.strip() == "h2"


def test_inventory_shape(cluster3: Cluster, tmp_path: Path) -> None:
    path = cluster3.write_inventory(tmp_path / "inv.yml", {"flodl_cmd": "train"},
                                    {"h2": {"flodl_path": "/p"}})
    doc = json.loads(path.read_text())
    assert doc["all"]["vars"] == {"flodl_cmd": "train"}
    workers = doc["all"]["children"]["flodl_workers"]["hosts"]
    assert list(workers) == ["h1", "h2", "h3"]
    assert workers["h2"]["flodl_path"] == "/p"
    assert workers["h1"]["ansible_host"] == cluster3.host("h1").ip
    assert workers["h1"]["ansible_user"] == "root"
    assert workers["h1"]["ansible_ssh_private_key_file"] == str(cluster3.key_path)
    assert "-o StrictHostKeyChecking=no" in workers["h1"]["ansible_ssh_common_args"]
    local = doc["all"]["children"]["ungrouped"]["hosts"]["localhost"]
    assert local["ansible_connection"] == "local"


def test_ansible_reaches_every_host(request: pytest.FixtureRequest, installed_collection, cluster3: Cluster,
                                    tmp_path: Path) -> None:
    ic = _integration_conftest(request)
    inv = cluster3.write_inventory(tmp_path / "inventory.yml", {})
    proc = ic.run_ansible(installed_collection,
                          ["ansible", "-i", str(inv), "flodl_workers", "-m", "ansible.builtin.raw", "-a", "hostname",
                           "--forks", "10"],
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for h in cluster3.hosts:
        block = proc.stdout.split(f"{h.name} | CHANGED | rc=0 >>", 1)
        assert len(block) == 2, proc.stdout
        assert block[1].split()[0] == h.name
    assert all(h.connections() >= 1 for h in cluster3.hosts)
