"""Real multi-host test cluster: one network namespace + sshd per host.

Stdlib only; runs under whichever Python imports or executes it.

Each host is a network namespace joined by a veth pair to a bridge in the
root namespace (``flbr<k>``, controller address ``192.168.<k>.1``, hosts at
``192.168.<k>.11+``), running ``unshare --uts --mount --pid --fork
--kill-child --mount-proc --propagation private`` with a small sh init that
sets the hostname, mounts a private tmpfs on /tmp, bind-mounts a private
directory over /root, applies the host's quirks and ``exec``s sshd.  Hosts
share the machine's filesystem everywhere else, which is what flodl calls
the shared project mount (see :meth:`Cluster.shared_root`).

The /24 is allocated under a lock in /run/flodl-netns/, so concurrent test
runs on the same machine never collide.  A cluster of more than 244 hosts gets an
aligned block of /24s instead (a /23 up to 500 hosts, a /22 up to 1012), on the one bridge.  Teardown is by recorded PID only
(verified by process start time), never by process name.

CLI::

    netns_cluster.py up --hosts h1,h2,h3 [--quirk h2:arch_i686 ...]
                        [--quirk h3:missing=/path] [--user flodltest]
                        --state DIR [--inventory FILE]
    netns_cluster.py down --state DIR

``FLODL_NETNS_SSH_KEX`` (environment, read when a cluster starts): the hosts' sshd ``KexAlgorithms``, so that
every client (Ansible's ssh, the launcher's, the probe's) negotiates one of them. Unset: OpenSSH's default
(``sntrup761x25519-sha512`` on OpenSSH 9.2, about 0.16 CPU-s per handshake, client and server together, against
0.05 for ``curve25519-sha256``); the integration tests set the latter (tests/integration/conftest.py), the
benches keep the default.

Quirks (``HostSpec`` fields):

- ``arch_i686``: sshd runs under ``setarch i686`` so ``uname -m`` prints i686.
- ``musl_ldd``: /usr/bin/musl-ldd is bind-mounted over /usr/bin/ldd
  (``ldd --version`` then prints ``musl libc`` on stderr and exits 1).
- ``missing_paths``: each path is made absent on that host.  The deepest
  existing ancestor A of the path gets a tmpfs in the host's mount namespace,
  and every *other* entry of A is bind-mounted back (recursively), so the
  siblings stay the real, shared files.  Caveats: entries created directly in
  A after the host started are not visible on that host, and files that host
  creates directly in A land in its private tmpfs.  Create the shared layout
  before ``up()``; use paths under :meth:`Cluster.shared_root`.  Refused for
  system directories (/, /usr, /etc, ...) when the hidden entry exists.
- ``unreadable_paths``: a root-owned 0700 directory (0600 file for a file) is
  bind-mounted over the path (created as a directory if absent, on the shared
  filesystem).  Only a non-root ``user`` notices.
- ``small_paths``: a 64 MiB tmpfs is mounted on each path in that host's mount namespace (the directory is
  created first, on the shared filesystem for a shared path): a file system too small, seen by that host only.
- ``no_pkill``: a read-only overlay on /usr/bin with a whiteout for pkill.
- ``unreachable``: the host gets an address on the bridge but no namespace
  and no sshd: connections fail with "No route to host" within about 1 s.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

RUN_DIR = Path("/run/flodl-netns")
SHARED_BASE = Path("/var/tmp/flodl-cluster-tests")
SUBNETS = range(100, 200)  # 192.168.<k>.0/24
FIRST_HOST_OCTET = 11


def subnet_span(hosts: int) -> int:
    """How many consecutive /24s (a power of two) a cluster of ``hosts`` needs: one up to 244 hosts."""
    span = 1
    while FIRST_HOST_OCTET + hosts > 256 * span - 1:  # the block's last address is its broadcast
        span *= 2
    return span


INSTALL_HINT = "apt-get install openssh-server iproute2 musl musl-tools util-linux procps"
REQUIRED_TOOLS = ("ip", "unshare", "sshd", "setarch", "musl-ldd", "ssh", "ssh-keygen", "mount")
_SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SYSTEM_DIRS = {
    "/", "/usr", "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/local", "/etc", "/var", "/run", "/proc",
    "/sys", "/dev", "/home", "/root", "/tmp", "/bin", "/sbin", "/lib", "/lib64", "/opt", "/srv", "/boot",
}
_HOSTNAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$", re.IGNORECASE)


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=_SBIN_PATH)


def require_root() -> str | None:
    """None when a cluster can be started here, else the reason (with the fix)."""
    if os.geteuid() != 0:
        return f"the netns test cluster needs root (network namespaces, mounts, sshd): run the tests as root, with {INSTALL_HINT}"
    missing = [t for t in REQUIRED_TOOLS if _tool(t) is None]
    if missing:
        return f"missing tools for the netns test cluster: {', '.join(missing)}; install them with: {INSTALL_HINT}"
    try:
        with open("/proc/filesystems", encoding="ascii") as fh:
            if "overlay" not in fh.read():
                return "the kernel has no overlay filesystem (needed for the no_pkill quirk)"
    except OSError as exc:
        return f"cannot read /proc/filesystems: {exc}"
    return None


# --------------------------------------------------------------------------- processes


def _proc_start(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a live, non-zombie process, else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = data[data.rfind(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _alive(pid: int | None, start: int | None) -> bool:
    return bool(pid) and start is not None and _proc_start(pid) == start


def _kill(pid: int | None, start: int | None, sig: int = signal.SIGKILL) -> None:
    if _alive(pid, start):
        try:
            os.kill(pid, sig)  # type: ignore[arg-type]
        except ProcessLookupError:
            pass


def _run(argv: list[str], *, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed (rc={proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def _ip_batch(lines: Iterable[str], *, force: bool = False) -> subprocess.CompletedProcess[str]:
    text = "".join(line + "\n" for line in lines)
    argv = [_tool("ip") or "ip"] + (["-force"] if force else []) + ["-batch", "-"]
    return _run(argv, stdin=text, check=not force)


# --------------------------------------------------------------------------- specs


@dataclass
class HostSpec:
    """One cluster host and its quirks (see the module docstring)."""

    name: str
    arch_i686: bool = False
    musl_ldd: bool = False
    missing_paths: list[str] = field(default_factory=list)
    unreadable_paths: list[str] = field(default_factory=list)
    small_paths: list[str] = field(default_factory=list)
    no_pkill: bool = False
    unreachable: bool = False

    def __post_init__(self) -> None:
        if not _HOSTNAME_RE.match(self.name):
            raise ValueError(f"bad host name {self.name!r}: use a short hostname like h1")
        for p in [*self.missing_paths, *self.unreadable_paths, *self.small_paths]:
            if not os.path.isabs(p):
                raise ValueError(f"{self.name}: quirk paths must be absolute: {p!r}")


@dataclass
class Host:
    """A started (or allocated) host: what tests use."""

    name: str
    ip: str
    spec: HostSpec
    netns: str | None = None
    veth: str | None = None
    pid: int | None = None  # the unshare process
    pid_start: int | None = None
    init_pid: int | None = None  # the host's PID 1 (sshd) as seen from the machine
    init_start: int | None = None
    log_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["spec"] = asdict(self.spec)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Host":
        d = dict(d)
        d["spec"] = HostSpec(**d["spec"])
        return cls(**d)

    def log(self) -> str:
        """The host's sshd log (LogLevel VERBOSE: one "Connection from" per connection)."""
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        return Path(self.log_path).read_text(errors="replace")

    def connections(self) -> int:
        return self.log().count("Connection from ")


# --------------------------------------------------------------------------- cluster


class Cluster:
    """A set of namespace hosts reachable over real ssh.

    ``Cluster(hosts, state_dir, user=None)``; ``up()``/``down()`` or use it as
    a context manager.  ``Cluster.load(state_dir)`` re-attaches from another
    process (``cluster.json``).
    """

    def __init__(self, hosts: list[HostSpec], state_dir: Path | str, user: str | None = None,
                 shared_root: Path | str | None = None) -> None:
        names = [h.name for h in hosts]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate host names: {names}")
        if not hosts:
            raise ValueError("a cluster needs at least one host")
        self.specs = list(hosts)
        self.state_dir = Path(state_dir).resolve()
        self.user = user
        self.k: int | None = None
        self.hosts: list[Host] = []
        self._popen: dict[str, subprocess.Popen[bytes]] = {}
        self._shared: Path | None = Path(shared_root) if shared_root else None
        self._own_shared = False
        self.timings: dict[str, float] = {}
        self._detach = False

    # ---- addresses and ssh ------------------------------------------------
    @property
    def controller_ip(self) -> str:
        self._need_k()
        return f"192.168.{self.k}.1"

    @property
    def span(self) -> int:
        """The /24s this cluster's block spans (1 up to 244 hosts)."""
        return subnet_span(len(self.specs))

    @property
    def prefix(self) -> int:
        return 24 - (self.span.bit_length() - 1)

    @property
    def bridge(self) -> str:
        self._need_k()
        return f"flbr{self.k}"

    @property
    def runtime_dir(self) -> Path:
        self._need_k()
        return RUN_DIR / f"c{self.k}"

    @property
    def key_path(self) -> Path:
        return self.state_dir / "id_ed25519"

    @property
    def login_user(self) -> str:
        return self.user or "root"

    @property
    def control_dir(self) -> Path:
        return self.runtime_dir / "cp"

    @property
    def ssh_options(self) -> list[str]:
        """``-o`` values for a client (no host-key checking, quiet, bounded connect)."""
        return [
            "UserKnownHostsFile=/dev/null",
            "StrictHostKeyChecking=no",
            "LogLevel=ERROR",
            "ConnectTimeout=10",
            "IdentitiesOnly=yes",
        ]

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def __getitem__(self, name: str) -> Host:
        return self.host(name)

    def __iter__(self):
        return iter(self.hosts)

    def ssh_argv(self, host: Host | str, command: str, *, user: str | None = None,
                 extra_options: Iterable[str] = ()) -> list[str]:
        h = self.host(host) if isinstance(host, str) else host
        argv = [_tool("ssh") or "ssh", "-n", "-T", "-i", str(self.key_path)]
        for opt in [*self.ssh_options, *extra_options]:
            argv += ["-o", opt]
        argv += [f"{user or self.login_user}@{h.ip}", command]
        return argv

    def ssh(self, host: Host | str, command: str, *, user: str | None = None, timeout: float = 60,
            extra_options: Iterable[str] = ()) -> subprocess.CompletedProcess[str]:
        """Run one command on a host over real ssh; output captured as text."""
        return subprocess.run(self.ssh_argv(host, command, user=user, extra_options=extra_options),
                              capture_output=True, text=True, timeout=timeout, check=False)

    # ---- inventory ----------------------------------------------------------
    def hostvars(self, host: Host | str) -> dict[str, Any]:
        h = self.host(host) if isinstance(host, str) else host
        opts = [*self.ssh_options, f"ControlPath={self.control_dir}/%C"]
        return {
            "ansible_host": h.ip,
            "ansible_user": self.login_user,
            "ansible_ssh_private_key_file": str(self.key_path),
            "ansible_ssh_common_args": " ".join(f"-o {o}" for o in opts),
        }

    def inventory(self, group_vars: dict[str, Any] | None = None,
                  host_vars: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        host_vars = host_vars or {}
        unknown = set(host_vars) - {h.name for h in self.hosts} - {"localhost"}
        if unknown:
            raise KeyError(f"host_vars for unknown hosts: {sorted(unknown)}")
        workers = {h.name: {**self.hostvars(h), **host_vars.get(h.name, {})} for h in self.hosts}
        local = {
            "ansible_connection": "local",
            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            **host_vars.get("localhost", {}),
        }
        return {
            "all": {
                "vars": dict(group_vars or {}),
                "children": {
                    "flodl_workers": {"hosts": workers},
                    "ungrouped": {"hosts": {"localhost": local}},
                },
            }
        }

    def write_inventory(self, path: Path | str, group_vars: dict[str, Any] | None = None,
                        host_vars: dict[str, dict[str, Any]] | None = None) -> Path:
        """Write a YAML (JSON syntax) inventory: group flodl_workers in host order, all.vars."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.inventory(group_vars, host_vars), indent=2) + "\n")
        return path

    # ---- shared filesystem --------------------------------------------------
    def shared_root(self) -> Path:
        """A directory outside /tmp that every host sees at the same path (removed by down())."""
        if self._shared is None:
            SHARED_BASE.mkdir(mode=0o755, parents=True, exist_ok=True)
            self._shared = SHARED_BASE / f"{os.getpid()}-{uuid.uuid4().hex[:10]}"
            self._shared.mkdir()
            self._own_shared = True
            if self.user:
                _ensure_user(self.user)
                shutil.chown(self._shared, self.user, self.user)
            self._save()
        return self._shared

    # ---- lifecycle ------------------------------------------------------------
    def __enter__(self) -> "Cluster":
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def _need_k(self) -> None:
        if self.k is None:
            raise RuntimeError("cluster not up")

    def up(self, timeout: float = 30.0, detach: bool = False) -> "Cluster":
        """Start every host and wait until each sshd listens.

        Without ``detach`` the hosts die with this process (PR_SET_PDEATHSIG), so a
        killed test run leaves no sshd behind; its network leftovers are reclaimed by
        the next allocation.  The CLI uses ``detach=True``.
        """
        self._detach = detach
        reason = require_root()
        if reason:
            raise RuntimeError(reason)
        t0 = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.user:
            _ensure_user(self.user)
        self.k = _allocate(self.state_dir, self.span)
        try:
            self._start(timeout)
        except BaseException:
            self.down()
            raise
        self.timings["up"] = time.monotonic() - t0
        return self

    def _start(self, timeout: float) -> None:
        k = self.k
        rt = self.runtime_dir
        if rt.exists():
            shutil.rmtree(rt)
        rt.mkdir(parents=True)
        os.chmod(rt, 0o755)
        self.control_dir.mkdir()
        self.hosts = []
        for i, spec in enumerate(self.specs):
            off = FIRST_HOST_OCTET + i
            ip = f"192.168.{k + off // 256}.{off % 256}"
            h = Host(name=spec.name, ip=ip, spec=spec)
            if not spec.unreachable:
                h.netns = f"fl{k}-{spec.name}"
                h.veth = f"fv{k}-{i}"
                h.log_path = str(self.state_dir / f"{spec.name}.sshd.log")
            self.hosts.append(h)
        self._save()  # from here on down() can clean up a partial start

        # keys: client key (kept across up/down in state_dir) + one host key per host, in parallel
        keygen = _tool("ssh-keygen") or "ssh-keygen"
        procs = []
        if not self.key_path.exists():
            procs.append(subprocess.Popen([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "flodl-netns-test",
                                           "-f", str(self.key_path)], stdout=subprocess.DEVNULL))
        live = [h for h in self.hosts if h.netns]
        for h in live:
            hd = rt / h.name
            (hd / "home" / ".ssh").mkdir(parents=True)
            os.chmod(hd / "home", 0o700)
            procs.append(subprocess.Popen([keygen, "-q", "-t", "ed25519", "-N", "", "-C", h.name,
                                           "-f", str(hd / "ssh_host_ed25519_key")], stdout=subprocess.DEVNULL))
        for p in procs:
            if p.wait() != 0:
                raise RuntimeError(f"ssh-keygen failed: {p.args}")
        pub = Path(str(self.key_path) + ".pub").read_text()
        (rt / "authorized_keys").write_text(pub)
        os.chmod(rt / "authorized_keys", 0o644)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

        # root namespace: bridge, namespaces, veths (one ip process)
        lines = [
            f"link add {self.bridge} type bridge stp_state 0 forward_delay 0",
            f"addr add {self.controller_ip}/{self.prefix} dev {self.bridge}",
            f"link set {self.bridge} up",
        ]
        for h in live:
            lines += [
                f"netns add {h.netns}",
                f"link add {h.veth} type veth peer name eth0 netns {h.netns}",
                f"link set {h.veth} master {self.bridge} up",
            ]
        _ip_batch(lines)
        # fail fast on addresses with nobody behind them (the unreachable quirk)
        for knob, value in (("mcast_solicit", "2"), ("retrans_time_ms", "300")):
            try:
                Path(f"/proc/sys/net/ipv4/neigh/{self.bridge}/{knob}").write_text(value)
            except OSError:
                pass

        # hosts: all started at once, then wait for every sshd
        ip_bin = _tool("ip") or "ip"
        unshare = _tool("unshare") or "unshare"
        preexec = None if self._detach else _pdeathsig_setter()
        t_spawn = time.monotonic()
        for h in live:
            init = self._write_host_files(h)
            log = open(h.log_path, "ab")  # noqa: SIM115 (handed to the child)
            try:
                p = subprocess.Popen(
                    [ip_bin, "netns", "exec", h.netns, unshare, "--uts", "--mount", "--pid", "--fork",
                     "--kill-child", "--mount-proc", "--propagation", "private", "/bin/sh", str(init)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                    env={"PATH": _SBIN_PATH, "LANG": "C.UTF-8"}, close_fds=True,
                    preexec_fn=preexec,
                )
            finally:
                log.close()
            self._popen[h.name] = p
            h.pid = p.pid
            h.pid_start = _proc_start(p.pid)
        self._save()
        self._wait_ready(live, timeout)
        for h in live:
            kids = _children(h.pid) if h.pid else []
            if kids:
                h.init_pid = kids[0]
                h.init_start = _proc_start(kids[0])
        self._save()
        self.timings["hosts_ready"] = time.monotonic() - t_spawn

    def _write_host_files(self, h: Host) -> Path:
        rt = self.runtime_dir
        hd = rt / h.name
        spec = h.spec
        (hd / "home" / ".ssh" / "authorized_keys").write_text((rt / "authorized_keys").read_text())
        (hd / "net.batch").write_text(
            "link set lo up\n"
            f"addr add {h.ip}/{self.prefix} dev eth0\n"
            "link set eth0 up\n"
            "route add default dev eth0\n"
        )
        kex = os.environ.get("FLODL_NETNS_SSH_KEX", "").strip()  # see the module docstring
        (hd / "sshd_config").write_text(
            "\n".join([
                "Port 22",
                f"ListenAddress {h.ip}",
                f"HostKey {hd}/ssh_host_ed25519_key",
                "PidFile none",
                f"AuthorizedKeysFile {rt}/authorized_keys .ssh/authorized_keys",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                "StrictModes no",
                "UseDNS no",
                "PrintMotd no",
                "X11Forwarding no",
                "MaxStartups 100:30:200",
                *([f"KexAlgorithms {kex}"] if kex else []),
                "MaxSessions 50",
                "LogLevel VERBOSE",
                "AcceptEnv LANG LC_*",
                "Subsystem sftp internal-sftp",
                "",
            ])
        )
        q = _shq
        sh = [
            "set -e",
            f"echo {q(h.name)} > /proc/sys/kernel/hostname",
            f"ip -batch {q(str(hd / 'net.batch'))}",
            "mount -t tmpfs -o mode=1777,size=2g flodl-tmp /tmp",
            f"mount --bind {q(str(hd / 'home'))} /root",
        ]
        if spec.no_pkill:
            wh = hd / "whiteout"
            wh.mkdir()
            os.mknod(wh / "pkill", 0o600 | 0o020000, os.makedev(0, 0))  # overlay whiteout
            sh.append(f"mount -t overlay flodl-nopkill -o ro,lowerdir={wh}:/usr/bin /usr/bin")
        if spec.musl_ldd:
            sh.append("mount --bind /usr/bin/musl-ldd /usr/bin/ldd")
        for n, path in enumerate(spec.missing_paths):
            sh += self._missing_path_script(hd, n, path)
        for n, path in enumerate(spec.unreadable_paths):
            src = hd / f"unreadable{n}"
            if os.path.isfile(path):
                src.write_text("")
                os.chmod(src, 0o600)
            else:
                os.makedirs(path, exist_ok=True)
                src.mkdir()
                os.chmod(src, 0o700)
            sh.append(f"mount --bind {q(str(src))} {q(path)}")
        for path in spec.small_paths:
            sh += [f"mkdir -p {q(path)}", f"mount -t tmpfs -o mode=0755,size=64m flodl-small {q(path)}"]
        sshd = f"/usr/sbin/sshd -D -e -f {q(str(hd / 'sshd_config'))}"
        if spec.arch_i686:
            sshd = "setarch i686 " + sshd
        sh.append(f"exec {sshd}")
        init = hd / "init.sh"
        init.write_text("\n".join(sh) + "\n")
        return init

    @staticmethod
    def _missing_path_script(hd: Path, n: int, path: str) -> list[str]:
        path = os.path.normpath(path)
        anc = os.path.dirname(path)
        hidden = os.path.basename(path)
        while not os.path.isdir(anc):  # deepest existing ancestor; hide the child on the way
            hidden = os.path.basename(anc)
            anc = os.path.dirname(anc)
        if anc in _SYSTEM_DIRS:
            if not os.path.lexists(os.path.join(anc, hidden)):
                return []  # already absent; a system dir is never covered
            raise ValueError(f"missing_paths: refusing to cover system directory {anc} (to hide {path})")
        stash = hd / f"stash{n}"
        stash.mkdir()
        q = _shq
        mode = oct(os.stat(anc).st_mode & 0o7777)[2:]
        return [
            f"mount --rbind {q(anc)} {q(str(stash))}",
            f"mount -t tmpfs -o mode={mode} flodl-missing {q(anc)}",
            f"for e in {q(str(stash))}/* {q(str(stash))}/.[!.]* {q(str(stash))}/..?*; do",
            '  [ -e "$e" ] || [ -L "$e" ] || continue',
            '  b=${e##*/}',
            f"  [ \"$b\" = {q(hidden)} ] && continue",
            f"  t={q(anc)}/\"$b\"",
            '  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$t"',
            '  elif [ -d "$e" ]; then mkdir "$t"; mount --rbind "$e" "$t"',
            '  else : > "$t"; mount --bind "$e" "$t"; fi',
            "done",
        ]

    def _wait_ready(self, hosts: list[Host], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = {h.name: h for h in hosts}
        while pending:
            for name, h in list(pending.items()):
                p = self._popen.get(name)
                if p is not None and p.poll() is not None:
                    raise RuntimeError(f"host {name} exited during start (rc={p.returncode}):\n{h.log()[-2000:]}")
                if h.pid and _listening(h.pid, 22):
                    del pending[name]
            if not pending:
                break
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {n}\n{h.log()[-1000:]}" for n, h in pending.items())
                raise RuntimeError(f"sshd not ready after {timeout}s on {sorted(pending)}\n{logs}")
            time.sleep(0.01)

    def down(self) -> None:
        """Stop every host (by PID), delete namespaces/veths/bridge, release the /24. Idempotent."""
        t0 = time.monotonic()
        if self.k is None:
            if self._own_shared and self._shared:
                shutil.rmtree(self._shared, ignore_errors=True)
            return
        rt = self.runtime_dir
        # 1. ControlPersist masters (ansible) first, while the hosts still answer
        ssh = _tool("ssh") or "ssh"
        if self.control_dir.is_dir():
            socks = list(self.control_dir.iterdir())
            procs = [subprocess.Popen([ssh, "-o", f"ControlPath={s}", "-O", "exit", "x"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for s in socks]
            for p in procs:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        # 2. the hosts: kill each host's PID 1, the kernel ends the rest of its PID namespace
        for h in self.hosts:
            for kid in _children(h.pid) if _alive(h.pid, h.pid_start) else []:
                _kill(kid, _proc_start(kid))
            _kill(h.init_pid, h.init_start)
        deadline = time.monotonic() + 10
        for h in self.hosts:
            p = self._popen.pop(h.name, None)
            if p is not None:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()  # unshare --kill-child takes the host with it
                    p.wait()
            else:
                while _alive(h.pid, h.pid_start) and time.monotonic() < deadline:
                    time.sleep(0.01)
                if _alive(h.pid, h.pid_start):
                    _kill(h.pid, h.pid_start)
        # 3. network
        # Deleting a namespace (once its processes are gone) destroys its veth end and the
        # kernel then removes the root end too, in one batched cleanup: much faster than
        # "link del" per veth.  Wait for that, delete any straggler explicitly.
        existing_ns = set(_netns_list())
        lines = [f"netns del {h.netns}" for h in self.hosts if h.netns in existing_ns]
        if f"flbr{self.k}" in os.listdir("/sys/class/net"):
            lines.append(f"link del flbr{self.k}")
        if lines:
            _ip_batch(lines, force=True)
        veths = {h.veth for h in self.hosts if h.veth}
        deadline = time.monotonic() + 10
        while veths & set(os.listdir("/sys/class/net")) and time.monotonic() < deadline:
            time.sleep(0.01)
        left = veths & set(os.listdir("/sys/class/net"))
        if left:
            _ip_batch([f"link del {v}" for v in sorted(left)], force=True)
        # 4. files and the /24
        shutil.rmtree(rt, ignore_errors=True)
        if self._own_shared and self._shared:
            shutil.rmtree(self._shared, ignore_errors=True)
            self._shared = None
            self._own_shared = False
        _release(self.k, self.span)
        self.k = None
        try:
            (self.state_dir / "cluster.json").unlink()
        except FileNotFoundError:
            pass
        self.timings["down"] = time.monotonic() - t0

    # ---- persistence ----------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "state_dir": str(self.state_dir),
            "user": self.user,
            "specs": [asdict(s) for s in self.specs],
            "hosts": [h.to_json() for h in self.hosts],
            "shared_root": str(self._shared) if self._shared else None,
            "own_shared": self._own_shared,
            "owner_pid": os.getpid(),
            "owner_start": _proc_start(os.getpid()),
        }

    def _save(self) -> None:
        if self.k is None:
            return
        data = json.dumps(self.to_json(), indent=2)
        for path in (self.state_dir / "cluster.json", RUN_DIR / f"net{self.k}.json"):
            tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
            tmp.write_text(data)
            os.replace(tmp, path)

    @classmethod
    def load(cls, state_dir: Path | str) -> "Cluster":
        data = json.loads((Path(state_dir) / "cluster.json").read_text())
        return cls._from_json(data)

    @classmethod
    def _from_json(cls, data: dict[str, Any]) -> "Cluster":
        c = cls([HostSpec(**s) for s in data["specs"]], data["state_dir"], data.get("user"))
        c.k = data["k"]
        c.hosts = [Host.from_json(h) for h in data["hosts"]]
        if data.get("shared_root"):
            c._shared = Path(data["shared_root"])
            c._own_shared = bool(data.get("own_shared"))
        return c

    def summary(self) -> str:
        lines = [f"cluster 192.168.{self.k}.0/{self.prefix} bridge {self.bridge} controller {self.controller_ip}",
                 f"key {self.key_path}  user {self.login_user}  shared {self._shared or '-'}"]
        for h in self.hosts:
            quirks = [k for k, v in asdict(h.spec).items() if k != "name" and v]
            lines.append(f"  {h.name:<8} {h.ip:<16} {'pid ' + str(h.pid) if h.pid else 'no host':<12} "
                         f"{','.join(quirks) or '-'}")
        for k, v in self.timings.items():
            lines.append(f"  {k}: {v:.2f}s")
        return "\n".join(lines)


def _pdeathsig_setter():
    """A preexec_fn making the child get SIGKILL when this process dies (prctl resolved up front)."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:  # runs between fork and exec: no imports, no locks
        prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL

    return preexec


def _listening(pid: int, port: int) -> bool:
    """True when the network namespace of ``pid`` has a TCP socket listening on ``port``.

    Read from /proc/<pid>/net/tcp, so the readiness check makes no connection
    (a host's sshd log then only shows connections made by the tests).
    """
    try:
        with open(f"/proc/{pid}/net/tcp", encoding="ascii") as fh:
            next(fh)
            for line in fh:
                parts = line.split()
                if parts[3] == "0A" and parts[1].endswith(f":{port:04X}"):
                    return True
    except (OSError, StopIteration):
        return False
    return False


def _shq(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


def _netns_list() -> list[str]:
    try:
        return os.listdir("/run/netns")
    except FileNotFoundError:
        return []


# --------------------------------------------------------------------------- allocation


_HELD: dict[str, int] = {}


class _lock:
    """Exclusive flock on /run/flodl-netns/<name>; re-entrant within this process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.fh = None

    def __enter__(self) -> "_lock":
        if _HELD.get(self.name, 0) == 0:
            RUN_DIR.mkdir(parents=True, exist_ok=True)
            self.fh = open(RUN_DIR / self.name, "a+")  # noqa: SIM115
            fcntl.flock(self.fh, fcntl.LOCK_EX)
        _HELD[self.name] = _HELD.get(self.name, 0) + 1
        return self

    def __exit__(self, *exc: object) -> None:
        _HELD[self.name] -= 1
        if self.fh is not None:
            self.fh.close()  # releases the flock


def _used_octets() -> set[int]:
    out = _run([_tool("ip") or "ip", "-4", "-o", "addr", "show"], check=False).stdout
    out += _run([_tool("ip") or "ip", "-4", "route", "show", "table", "all"], check=False).stdout
    used = {int(m) for m in re.findall(r"\b192\.168\.(\d+)\.", out)}
    for third, bits in re.findall(r"\b192\.168\.(\d+)\.\d+/(\d+)", out):  # a block wider than a /24
        width = 2 ** max(0, 24 - int(bits)) if 16 <= int(bits) < 24 else 1
        first = int(third) & ~(width - 1)
        used.update(range(first, first + width))
    return used


def _record_live(data: dict[str, Any]) -> bool:
    if _alive(data.get("owner_pid"), data.get("owner_start")):
        return True
    for h in data.get("hosts", []):
        if _alive(h.get("pid"), h.get("pid_start")) or _alive(h.get("init_pid"), h.get("init_start")):
            return True
    return False


def _allocate(state_dir: Path, span: int = 1) -> int:
    """Reserve a free 192.168.<k>.0/24 under the lock (``span`` > 1: that many aligned ones from k, each with its
    record); stale records (nothing alive) are reclaimed."""
    with _lock("alloc.lock"):
        used = _used_octets()
        links = set(os.listdir("/sys/class/net"))
        # Round robin from the last one handed out: a subnet just released is the last to be reused, so
        # a check that a cluster left nothing behind does not see the next cluster's bridge of the same k.
        cursor = RUN_DIR / "next-subnet"
        try:
            start = SUBNETS.index(int(cursor.read_text()))
        except (OSError, ValueError):
            start = 0
        for k in [*SUBNETS[start:], *SUBNETS[:start]]:
            block = range(k, k + span)
            if k % span or block[-1] not in SUBNETS:
                continue
            taken = False
            for j in block:
                rec = RUN_DIR / f"net{j}.json"
                if rec.exists():
                    try:
                        data = json.loads(rec.read_text())
                    except (OSError, ValueError):
                        data = {}
                    if _record_live(data) or (not data and time.time() - rec.stat().st_mtime < 60):
                        taken = True
                        break
                    if data.get("k") == j:  # stale: a crashed run; clean its leftovers
                        try:
                            Cluster._from_json(data).down()
                        except Exception:  # noqa: BLE001
                            pass
                        used = _used_octets()
                        links = set(os.listdir("/sys/class/net"))
                    rec.unlink(missing_ok=True)
                if j in used or f"flbr{j}" in links:
                    taken = True
                    break
            if taken:
                continue
            for j in block:  # the block's other /24s name their cluster's k (a stale one is only unlinked)
                (RUN_DIR / f"net{j}.json").write_text(json.dumps(
                    {"k": k, "state_dir": str(state_dir), "owner_pid": os.getpid(),
                     "owner_start": _proc_start(os.getpid()), "hosts": []}))
            cursor.write_text(str(SUBNETS[(SUBNETS.index(block[-1]) + 1) % len(SUBNETS)]))
            return k
    raise RuntimeError("no free 192.168.100-199.0/24 left for a netns cluster (see /run/flodl-netns/)")


def _release(k: int, span: int = 1) -> None:
    with _lock("alloc.lock"):
        for j in range(k, k + span):
            (RUN_DIR / f"net{j}.json").unlink(missing_ok=True)


def _ensure_user(user: str) -> None:
    """Create a non-root login user (key-only: password field '*', not locked)."""
    with _lock("user.lock"):
        if _run(["id", "-u", user], check=False).returncode != 0:
            r = _run([_tool("useradd") or "useradd", "-m", "-s", "/bin/bash", user], check=False)
            if r.returncode not in (0, 9):  # 9: exists (raced by another machine user)
                raise RuntimeError(f"useradd {user}: {r.stderr.strip()}")
        shadow = _run(["getent", "shadow", user], check=False).stdout.split(":")
        if len(shadow) < 2 or shadow[1] != "*":
            _run([_tool("usermod") or "usermod", "-p", "*", user])


# --------------------------------------------------------------------------- CLI

_BOOL_QUIRKS = {"arch_i686", "musl_ldd", "no_pkill", "unreachable"}


def _parse_specs(hosts: str, quirks: list[str]) -> list[HostSpec]:
    specs = {n: HostSpec(n) for n in [x.strip() for x in hosts.split(",") if x.strip()]}
    for q in quirks:
        name, dummy, what = q.partition(":")
        if name not in specs or not what:
            raise SystemExit(f"bad --quirk {q!r}: use HOST:arch_i686|musl_ldd|no_pkill|unreachable|missing=PATH|unreadable=PATH")
        key, dummy, val = what.partition("=")
        if key in _BOOL_QUIRKS and not val:
            setattr(specs[name], key, True)
        elif key in ("missing", "missing_paths") and val:
            specs[name].missing_paths.append(val)
        elif key in ("unreadable", "unreadable_paths") and val:
            specs[name].unreadable_paths.append(val)
        else:
            raise SystemExit(f"bad --quirk {q!r}")
    return list(specs.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="flodl netns ssh test cluster")
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start hosts")
    up.add_argument("--hosts", required=True, help="comma-separated host names, e.g. h1,h2,h3")
    up.add_argument("--quirk", action="append", default=[],
                    help="HOST:arch_i686|musl_ldd|no_pkill|unreachable|missing=PATH|unreadable=PATH")
    up.add_argument("--user", default=None, help="non-root login user (created if absent)")
    up.add_argument("--state", required=True, type=Path)
    up.add_argument("--inventory", type=Path, default=None)
    up.add_argument("--timeout", type=float, default=30.0)
    down = sub.add_parser("down", help="stop hosts started with up --state DIR")
    down.add_argument("--state", required=True, type=Path)
    args = ap.parse_args(argv)

    if args.cmd == "up":
        reason = require_root()
        if reason:
            print(reason, file=sys.stderr)
            return 2
        if (args.state / "cluster.json").exists():
            print(f"{args.state}/cluster.json exists: run down first", file=sys.stderr)
            return 1
        cluster = Cluster(_parse_specs(args.hosts, args.quirk), args.state, user=args.user)
        cluster.up(timeout=args.timeout, detach=True)
        for h in cluster.hosts:  # hosts outlive this process: forget the Popen handles
            cluster._popen.pop(h.name, None)
        if args.inventory:
            cluster.write_inventory(args.inventory)
            print(f"inventory {args.inventory}")
        print(cluster.summary())
        return 0
    if not (args.state / "cluster.json").exists():
        print(f"nothing to stop: no {args.state}/cluster.json")
        return 0
    cluster = Cluster.load(args.state)
    cluster.down()
    print(f"down: {len(cluster.hosts)} hosts stopped in {cluster.timings.get('down', 0):.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
