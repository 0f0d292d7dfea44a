"""CPU meter for the tests (bench/README.md, "Stop 37"): on with FLODL_CPU_METER=<file.jsonl>.

Each pytest process (xdist workers too) moves itself into a cpuacct cgroup of its own (cgroup v1 or v2,
when writable), so everything it starts, daemons that detach from it included (ssh ControlPersist
masters, the namespace hosts' sshd and what runs under them), is counted; docker containers run in
Docker's cgroups and are not. Per test (setup + call + teardown, so a module fixture's teardown counts
to the module's last test) one JSON line: wall seconds, the cgroup's CPU seconds, and user+sys seconds of
the process and its reaped children (getrusage), for a cross-check; and how many ansible CLIs, cargo and
docker commands the test process itself started.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

_OUT = os.environ.get("FLODL_CPU_METER", "")
_CG: Path | None = None
_STARTED: dict[str, int] = {}  # ansible CLIs and cargo started by this process, by name


def _count_popen() -> None:
    real_init = subprocess.Popen.__init__

    def init(self, args, *a, **kw):  # noqa: ANN001
        argv = [args] if isinstance(args, (str, bytes)) else list(args)
        name = os.path.basename(str(argv[0])) if argv else ""
        if name.startswith("ansible") or name in ("cargo", "docker"):
            _STARTED[name] = _STARTED.get(name, 0) + 1
        real_init(self, args, *a, **kw)

    subprocess.Popen.__init__ = init


def _cg_usage() -> float | None:
    if _CG is None:
        return None
    try:
        if (_CG / "cpuacct.usage").exists():
            return int((_CG / "cpuacct.usage").read_text()) / 1e9
        for line in (_CG / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
    except OSError:
        return None
    return None


def _self_cpu() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    return s.ru_utime + s.ru_stime


def _rusage() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def pytest_configure(config: pytest.Config) -> None:
    global _CG
    _count_popen()
    for base in (Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
        if not (base / "cgroup.procs").exists():
            continue
        for stale in base.glob("flodl-meter-*"):  # a meter whose process ended while a daemon it started lived on
            if not Path(f"/proc/{stale.name.rsplit('-', 1)[1]}").exists():
                try:
                    stale.rmdir()  # only when empty
                except OSError:
                    pass
        cg = base / f"flodl-meter-{os.getpid()}"
        try:
            cg.mkdir(exist_ok=True)
            (cg / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            continue
        _CG = cg
        break


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CG is not None:
        try:
            (_CG.parent / "cgroup.procs").write_text(str(os.getpid()))
            _CG.rmdir()
        except OSError:
            pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    t0, r0, g0, s0 = time.monotonic(), _rusage(), _cg_usage(), _self_cpu()
    _STARTED.clear()
    yield
    g1 = _cg_usage()
    rec = {
        "test": item.nodeid,
        "file": item.path.name,
        "wall": round(time.monotonic() - t0, 2),
        "rusage_cpu": round(_rusage() - r0, 2),
        "self_cpu": round(_self_cpu() - s0, 2),  # the pytest process itself: polls, output parsing
        "cg_cpu": round(g1 - g0, 2) if g0 is not None and g1 is not None else None,
        "pid": os.getpid(),
        "started": dict(_STARTED),
    }
    with open(_OUT, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec) + "\n")
