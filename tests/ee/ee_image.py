"""The execution environment image, built the way an admin builds it, from a base made here.

Stdlib only (plus ansible-builder, run as a CLI). Importable (``ensure_ee_image``) and a CLI::

    python tests/ee/ee_image.py build     # prints "EE image build: N s (steps)"

No image registry is reachable, so the base is made locally: the harness's debootstrap
rootfs (cached as a tar under FLODL_TEST_CACHE_DIR), imported as ``local/debian:bookworm``,
plus python3, pip and venv (``EE_BASE``). ansible-builder 3 then builds the repository's own
``execution-environment.yml`` unchanged: the build arguments it declares (base image, Python,
package manager) point it at that Debian base instead of CentOS Stream.

Caches (what a second run reuses): the rootfs tar in FLODL_TEST_CACHE_DIR, and the last
collection tarball in FLODL_TEST_CACHE_DIR/ee/<checkout id>/ (same content, same bytes);
Docker's layer cache for the base and the EE (a second build with the same inputs is all
cache hits). The image is tagged per checkout (``EE_IMAGE``).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests" / "harness"))

from docker_engine import (  # noqa: E402
    BASE_IMAGE,
    CACHE_DIR,
    DockerEngine,
    DockerError,
    _global_lock,
    _rootfs_tarball,
    debian_mirror,
    image_exists,
)

EE_BASE = "flodl-test/ee-base:bookworm"
# One tag per checkout: two checkouts building at once never run each other's image.
_CHECKOUT = hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:10]
EE_IMAGE = f"flodl-test/ee:checkout-{_CHECKOUT}"
TARBALL_CACHE = CACHE_DIR / "ee" / _CHECKOUT

# What ansible-builder's own steps need in a base: a Python whose `-m ensurepip` works (its
# pip_install script always runs it) and venv (its assemble script). Debian disables ensurepip
# for the system python (PEP 668), so the base carries a venv, first on PATH, as the EE's
# Python. The apt lists stay: ansible-builder installs the bindep packages with the base's
# package manager in a later stage (PKGMGR_OPTS, read by its scripts: no X libraries for
# openssh-client's recommended xauth). The machine's own CA certificates go in too (and pip is
# told to use the system store): PyPI may be reached through a TLS-inspecting proxy.
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")
EE_PYTHON = "/opt/ee/bin/python3"
BASE_LABEL = "org.flodl.cluster.tests=ee-base"
# Docker's classic builder prints " ---> <image id>" after every step.
STEP_IMAGE = re.compile(r"---> ([0-9a-f]{12})\b")
BASE_DOCKERFILE = """\
FROM {base}
LABEL org.flodl.cluster.tests.apt-week={week}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      python3 python3-venv ca-certificates \\
 && python3 -m venv --without-pip /opt/ee
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates
ENV PATH=/opt/ee/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    DEBIAN_FRONTEND=noninteractive PIP_CERT=/etc/ssl/certs/ca-certificates.crt \\
    PKGMGR_OPTS=--no-install-recommends
LABEL {label}
"""

# The build arguments execution-environment.yml's Containerfile declares, for this base.
BUILD_ARGS = {
    "EE_BASE_IMAGE": EE_BASE,
    "PYCMD": EE_PYTHON,
    "PYPKG": "python3",
    "PKGMGR": "/usr/bin/apt-get",
    # ansible-builder runs `$PKGMGR clean all` unless this is set: apt-get clean takes no argument.
    "PKGMGR_PRESERVE_CACHE": "always",
}


def _run(argv: list[str], *, timeout: float, **kw) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kw)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-60:])
        raise DockerError(f"{' '.join(argv)} exited {proc.returncode}\n{tail}")
    return proc


def _ensure_base(timings: dict[str, float]) -> None:
    with _global_lock():
        if not image_exists(BASE_IMAGE):
            t0 = time.monotonic()
            tarball = _rootfs_tarball(debian_mirror())
            timings["rootfs"] = time.monotonic() - t0
            t0 = time.monotonic()
            _run(["docker", "import", str(tarball), BASE_IMAGE], timeout=600)
            timings["import"] = time.monotonic() - t0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="flodl-ee-base-") as ctx:
        # The week in a label: the base's apt lists (Docker caches that layer) are refreshed weekly,
        # before the mirror drops the package versions they name.
        week = time.strftime("%G-%V")
        (Path(ctx) / "Dockerfile").write_text(BASE_DOCKERFILE.format(base=BASE_IMAGE, week=week, label=BASE_LABEL))
        (Path(ctx) / "ca").mkdir()
        for crt in LOCAL_CA_DIR.glob("*.crt") if LOCAL_CA_DIR.is_dir() else []:
            shutil.copy(crt, Path(ctx) / "ca" / crt.name)
        # --network host: the harness's daemon runs with --bridge=none.
        _run(["docker", "build", "--network", "host", "-t", EE_BASE, ctx], timeout=1800)
    timings["base"] = time.monotonic() - t0


def _files_digest(tarball: Path) -> str:
    """The collection's content (FILES.json lists every file's sha256), not the tar's timestamps."""
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("FILES.json")
        return hashlib.sha256(member.read() if member else b"").hexdigest()


def _reuse_same_tarball(ee_dir: Path) -> None:
    """Keep the bytes of an earlier tarball of the same content, so Docker's layer cache hits.

    ``ansible-galaxy collection build`` stamps the build time into the tar: every build differs.
    """
    built = next(ee_dir.glob("flodl-cluster-*.tar.gz"))
    cached = TARBALL_CACHE / built.name
    digest = _files_digest(built)
    if cached.exists() and _files_digest(cached) == digest:
        shutil.copy2(cached, built)
        return
    TARBALL_CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(cached.name + ".partial")
    shutil.copy2(built, partial)
    os.replace(partial, cached)


def _builder() -> str:
    """ansible-builder of this venv, else of the 2.19 venv beside it (scripts/bootstrap.sh puts it there)."""
    venv_bin = Path(sys.executable).parent
    for found in (venv_bin / "ansible-builder", venv_bin.parent.parent / "ansible-2.19" / "bin" / "ansible-builder"):
        if found.exists():
            return str(found)
    which = shutil.which("ansible-builder")
    if which is None:
        raise DockerError(f"ansible-builder not found next to {sys.executable} nor in the 2.19 venv: "
                          "run scripts/bootstrap.sh")
    return which


def ensure_ee_image(image: str = EE_IMAGE) -> dict[str, float]:
    """Build ``image`` from the repository's definition; return step timings (s)."""
    timings: dict[str, float] = {}
    _ensure_base(timings)
    with tempfile.TemporaryDirectory(prefix="flodl-ee-") as tmp:
        work = Path(tmp)
        # A copy: the build leaves the checkout's ee/ as it is (tarball and requirements.yml).
        shutil.copy(REPO_ROOT / "execution-environment.yml", work)
        shutil.copytree(REPO_ROOT / "ee", work / "ee",
                        ignore=shutil.ignore_patterns("*.tar.gz", "requirements.yml"))
        t0 = time.monotonic()
        env = {**os.environ, "ANSIBLE_GALAXY": str(Path(_builder()).parent / "ansible-galaxy")}
        _run([str(REPO_ROOT / "scripts" / "ee-prepare.sh"), str(work / "ee")], timeout=300, env=env)
        _reuse_same_tarball(work / "ee")
        timings["tarball"] = time.monotonic() - t0
        t0 = time.monotonic()
        argv = [_builder(), "build", "-f", "execution-environment.yml", "-c", "context", "-t", image,
                "--container-runtime", "docker", "-v", "3", "--extra-build-cli-args", "--network host"]
        for key, value in BUILD_ARGS.items():
            argv += ["--build-arg", f"{key}={value}"]
        built = _run(argv, timeout=1800, cwd=work)
        timings["ansible-builder"] = time.monotonic() - t0
    (TARBALL_CACHE / "last-build.log").write_text(built.stdout + built.stderr)  # for a look afterwards
    _drop_stale_stages(set(STEP_IMAGE.findall(built.stdout + built.stderr)))
    return timings


def _drop_stale_stages(current: set[str]) -> None:
    """Remove the untagged stage images of earlier EE builds (each content change leaves some).

    Only images of this build chain (they carry the base's label) that this build did not use:
    the current stages stay, they are Docker's cache for the next build.
    """
    listed = _run(["docker", "images", "-q", "--no-trunc", "--filter", "dangling=true",
                   "--filter", f"label={BASE_LABEL}"], timeout=60).stdout.split()
    stale = [i for i in listed if i.split(":")[-1][:12] not in current]
    if stale:  # an image still parent of another one is refused by docker: left in place
        subprocess.run(["docker", "rmi", *stale], capture_output=True, timeout=300, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("action", choices=["build"])
    parser.add_argument("--image", default=EE_IMAGE)
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    engine = DockerEngine()
    try:
        engine.start()
        timings = ensure_ee_image(args.image)
    except (DockerError, subprocess.TimeoutExpired) as exc:
        print(f"EE image build failed: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.stop()
    steps = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    print(f"EE image build: {time.monotonic() - t0:.0f} s ({steps}); image {args.image}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
