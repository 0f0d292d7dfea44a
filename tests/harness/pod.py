"""An AWX "job pod" for the netns test cluster: run a command the way AWX runs a job.

Stdlib only.  A pod is what a job gets under AWX/Kubernetes, reduced to what the
collection can notice:

- **its own network namespace**, joined to the cluster's bridge by a veth, with an
  address of the cluster's /24 (``192.168.<k>.200+``).  It reaches every worker;
  NEW connections *into* the pod from its eth0 are dropped (one iptables rule in
  the pod's own namespace), so a worker cannot dial back, as with a pod behind
  the cluster network's NAT;
- **its own mount namespace**: each path in ``hide`` gets an empty tmpfs over it,
  so the shared project mount can be absent from the pod's filesystem;
- **its own PID and UTS namespaces** (hostname ``pod``): the command runs under a
  small sh init (PID 1 of the pod) that forwards SIGTERM to it, as the EE's init
  does, and whose exit ends the whole pod.

``kill()`` is a pod deletion / OOM kill: SIGKILL to the pod's PID 1, so the kernel
SIGKILLs every process in the pod at once (setsid'd and double-forked ones too,
ssh ControlPersist masters included).  ``terminate()`` is the SIGTERM a cancel
sends first.

Usage::

    with Pod(cluster, hide=[str(shared)]) as pod:
        proc = pod.spawn(["ansible-playbook", ...], env=..., stdout=subprocess.PIPE)
        ...
        pod.kill()          # every process of the pod is gone when this returns
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any, Iterable

from netns_cluster import Cluster, _alive, _children, _ip_batch, _pdeathsig_setter, _proc_start, _shq, _tool

FIRST_POD_OCTET = 200
_USED: dict[int, set[int]] = {}  # cluster /24 -> pod indexes in use by this process

_INIT = """\
set -e
echo pod > /proc/sys/kernel/hostname
{hides}
set +e
child= term= cut=
trap 'term=1 cut=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT
"$@" <&0 &
child=$!
[ -n "$term" ] && kill -TERM "$child" 2>/dev/null
# A trapped signal cuts a wait short (status > 128) and the child may be reaped meanwhile, so
# "kill -0" cannot tell if it still runs: wait again, and a repeated wait's 127 means "reported".
rc=
while :; do
  cut=
  wait "$child"; st=$?
  [ -n "$rc" ] && [ "$st" -eq 127 ] && break
  rc=$st
  [ -n "$cut" ] && [ "$st" -gt 128 ] || break
done
exit "$rc"
"""


class Pod:
    """One job pod on ``cluster``'s bridge (see the module docstring)."""

    def __init__(self, cluster: Cluster, hide: Iterable[str] = ()) -> None:
        if cluster.k is None:
            raise RuntimeError("the cluster is not up")
        self.cluster = cluster
        self.hide = [os.path.normpath(p) for p in hide]
        for p in self.hide:
            if not os.path.isabs(p) or p in ("/", "/usr", "/proc", "/sys", "/dev", "/etc"):
                raise ValueError(f"pod: cannot hide {p!r} (absolute, non-system paths only)")
        self.k = cluster.k
        used = _USED.setdefault(cluster.k, set())
        self.index = next(i for i in range(50) if i not in used)
        used.add(self.index)
        self.netns = f"fl{cluster.k}-pod{self.index}"
        self.veth = f"fv{cluster.k}-p{self.index}"
        self.ip = f"192.168.{cluster.k}.{FIRST_POD_OCTET + self.index}"
        self.proc: subprocess.Popen[Any] | None = None
        self._init: tuple[int, int | None] | None = None
        self._up = False

    # ---- network ------------------------------------------------------------
    def up(self) -> "Pod":
        ip = _tool("ip") or "ip"
        ns = self.netns
        _ip_batch([
            f"netns add {ns}",
            f"link add {self.veth} type veth peer name eth0 netns {ns}",
            f"link set {self.veth} master {self.cluster.bridge} up",
        ])
        self._up = True
        for argv in ([ip, "-n", ns, "link", "set", "lo", "up"],
                     [ip, "-n", ns, "addr", "add", f"{self.ip}/24", "dev", "eth0"],
                     [ip, "-n", ns, "link", "set", "eth0", "up"],
                     [ip, "-n", ns, "route", "add", "default", "dev", "eth0"],
                     [ip, "netns", "exec", ns, _tool("iptables") or "iptables", "-w", "-A", "INPUT", "-i", "eth0",
                      "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"]):
            r = subprocess.run(argv, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                self.down()
                raise RuntimeError(f"pod setup: {' '.join(argv)}: {r.stderr.strip()} (iptables: apt-get install iptables)")
        return self

    # ---- the job ------------------------------------------------------------
    def spawn(self, argv: list[str], **popen: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` as the pod's job (one at a time); ``popen`` goes to subprocess.Popen."""
        if not self._up:
            self.up()
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("this pod already runs a job")
        hides = "\n".join(f"mount -t tmpfs -o mode=0755 flodl-pod-hide {_shq(p)}" for p in self.hide)
        script = _INIT.format(hides=hides)
        self.proc = subprocess.Popen(
            [_tool("ip") or "ip", "netns", "exec", self.netns, _tool("unshare") or "unshare", "--uts", "--mount",
             "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private",
             "/bin/sh", "-c", script, "pod-init", *argv],
            preexec_fn=_pdeathsig_setter(), **popen)
        deadline = time.monotonic() + 10
        while True:  # ip netns exec execs unshare; its child is the pod's PID 1
            kids = _children(self.proc.pid)
            if kids:
                self._init = (kids[0], _proc_start(kids[0]))
                return self.proc
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the pod's init did not start (rc={self.proc.poll()})")
            time.sleep(0.005)

    def pids(self) -> list[int]:
        """Every live process in the pod (machine PIDs), its init included."""
        if self._init is None or not _alive(*self._init):
            return []
        try:
            ns = os.readlink(f"/proc/{self._init[0]}/ns/pid")
        except OSError:
            return []
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/ns/pid") == ns and _proc_start(int(entry)) is not None:
                        found.append(int(entry))
                except OSError:
                    continue
        return sorted(found)

    def main_pid(self) -> int | None:
        """The job's own process (the init's child), or None once it ended."""
        if self._init is None or not _alive(*self._init):
            return None
        kids = _children(self._init[0])
        return kids[0] if kids else None

    def terminate(self) -> None:
        """SIGTERM to the pod's init, which forwards it to the job (a cancel's first step)."""
        if self._init is not None and _alive(*self._init):
            os.kill(self._init[0], signal.SIGTERM)

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL every process of the pod at once (pod deletion); returns when none is left."""
        if self._init is not None and _alive(*self._init):
            os.kill(self._init[0], signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        left = self.pids()
        if left:
            raise RuntimeError(f"pod processes survived SIGKILL of its init: {left}")

    def down(self) -> None:
        """Kill the job (if any) and delete the pod's namespace and veth. Idempotent."""
        self.kill()
        if self._up:
            _ip_batch([f"netns del {self.netns}"], force=True)
            deadline = time.monotonic() + 10
            while self.veth in os.listdir("/sys/class/net") and time.monotonic() < deadline:
                time.sleep(0.01)
            if self.veth in os.listdir("/sys/class/net"):
                _ip_batch([f"link del {self.veth}"], force=True)
            self._up = False
        _USED.get(self.k, set()).discard(self.index)

    def __enter__(self) -> "Pod":
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()


__all__ = ["Pod"]
