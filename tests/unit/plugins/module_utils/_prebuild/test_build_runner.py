"""The prebuild on the build host (build_runner, build_process): real builds of a stand-in `cargo`.

The stand-in is a shell script first on the build's PATH (the module's ``env``): it writes the binary
cargo would write under ``CARGO_TARGET_DIR``, or fails, hangs or writes nothing, by its target dir.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_runner import (
    ARGUMENT_SPEC,
    DEFAULT_BUILD_TIMEOUT,
    build,
)

CU = "precompiled/cu128"
CPU = "precompiled/cpu"

FAKE_CARGO = """#!/bin/sh
# cargo build --release [--features F] --bin NAME, as the plan runs it
while [ $# -gt 0 ]; do [ "$1" = --bin ] && bin=$2; shift; done
echo "compiling $bin for $CARGO_TARGET_DIR (umask $(umask))"
case "$CARGO_TARGET_DIR" in
  *bad*) echo "error[E0425]: broken" >&2; exit 3 ;;
  *hang*) exec sleep 30 ;;
  *nobin*) exit 0 ;;
esac
# like cargo, a fresh binary is left as it is
[ -f "$CARGO_TARGET_DIR/release/$bin" ] && exit 0
mkdir -p "$CARGO_TARGET_DIR/release" && echo "binary of $LIBTORCH_PATH" > "$CARGO_TARGET_DIR/release/$bin"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for arch in (CU, CPU):
        (root / "libtorch" / arch / "lib").mkdir(parents=True)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "cargo").write_text(FAKE_CARGO, encoding="utf-8")
    (tools / "cargo").chmod(0o755)
    return root


def params(root: Path, workers: list[dict[str, Any]], **over: Any) -> dict[str, Any]:
    tools = root.parent / "bin"
    p = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    p.update(project_root=str(root), cmd="train", workers=workers,
             env={"PATH": f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}"})
    p.update(over)
    return p


def worker(host: str, arch: str | None = CU) -> dict[str, Any]:
    return {"host": host, "path": "/srv/w", "arch": arch}


def test_a_shared_variant_builds_once_and_links_the_others_then_is_up_to_date(project):
    first = build(params(project, [worker("w1"), worker("w2")]), check_mode=False)
    assert not first.get("failed"), first.get("msg")
    assert first["changed"] is True
    assert first["hosts"]["w1"]["status"] == "built" and first["hosts"]["w2"]["status"] == "linked"
    built = project / "target/cluster/w1/precompiled-cu128/release/train"
    linked = project / "target/cluster/w2/precompiled-cu128/release/train"
    assert os.path.samefile(built, linked)
    assert built.read_text(encoding="utf-8") == f"binary of {project}/libtorch/{CU}\n"
    envelope = json.loads((project / "target/cluster/prebuild-envelope.json").read_text(encoding="utf-8"))
    assert envelope == first["envelope"] and sorted(envelope) == ["w1", "w2"]
    assert envelope["w2"]["bin"] == "target/cluster/w2/precompiled-cu128/release/train"
    log = (project / "target/cluster/w1/precompiled-cu128/prebuild.log").read_text(encoding="utf-8")
    assert "# flodl prebuild for w1, w2 (precompiled/cu128)" in log and "compiling train" in log
    assert "# ended:" in log and "rc=0" in log

    again = build(params(project, [worker("w1"), worker("w2")]), check_mode=False)
    assert not again.get("failed") and again["changed"] is False
    assert again["hosts"]["w1"]["status"] == "up to date"
    assert "already linked" in "\n".join(again["summary"])


def test_variants_built_once_run_together_and_a_new_host_builds_alongside(project):
    build(params(project, [worker("w1"), worker("w2", CPU)]), check_mode=False)
    again = build(params(project, [worker("w1"), worker("w2", CPU), worker("w3")], dedupe=False), check_mode=False)
    assert not again.get("failed")
    assert [b["status"] for b in again["builds"]] == ["up to date", "up to date", "built"]
    assert again["changed"] is True and sorted(again["envelope"]) == ["w1", "w2", "w3"]


def test_a_failed_build_fails_its_host_and_the_hosts_sharing_it(project):
    out = build(params(project, [worker("bad1"), worker("bad2"), worker("ok1", CPU)]), check_mode=False)
    assert out["failed"] is True and out["failed_hosts"] == ["bad1", "bad2"]
    assert "build exited with status 3" in out["failures"]["bad1"]
    assert "error[E0425]: broken" in out["failures"]["bad1"]  # the output tail names the compiler's error
    assert "shares the build of host bad1 (same variant), which failed" in out["failures"]["bad2"]
    assert out["hosts"]["ok1"]["status"] == "built"
    assert "bad1" in out["msg"] and not (project / "target/cluster/prebuild-envelope.json").exists()


def test_a_build_that_exits_0_without_its_binary_fails(project):
    out = build(params(project, [worker("nobin")]), check_mode=False)
    assert out["failed"] is True
    assert f"did not produce {project}/target/cluster/nobin/precompiled-cu128/release/train" in out["msg"]


def test_a_build_past_its_timeout_is_stopped_and_says_so(project):
    out = build(params(project, [worker("hang")], build_timeout=0.3), check_mode=False)
    assert out["failed"] is True and out["hosts"]["hang"]["rc"] is None
    assert "build timed out after 0.3 s" in out["failures"]["hang"]
    assert out["hosts"]["hang"]["seconds"] < 10


def test_missing_variant_and_missing_arch_fail_their_hosts_before_any_build(project):
    out = build(params(project, [worker("w1", "precompiled/cu999"), worker("w2", None)]), check_mode=False)
    assert out["failed"] is True and out["failed_hosts"] == ["w1", "w2"]
    assert f"{project}/libtorch/precompiled/cu999/lib is not a directory" in out["failures"]["w1"]
    assert "flodl_arch is not set" in out["failures"]["w2"]
    assert not (project / "target").exists()


def test_check_mode_says_what_would_build_and_writes_nothing(project):
    out = build(params(project, [worker("w1"), worker("w2")]), check_mode=True)
    assert [out["hosts"][h]["status"] for h in ("w1", "w2")] == ["would build", "would link"]
    assert out["envelope_json"].startswith('{"w1":') and not (project / "target").exists()
    failing = build(params(project, [worker("w1", None)]), check_mode=True)
    assert failing["failed"] is True and failing["failed_hosts"] == ["w1"]


@pytest.mark.parametrize("over, words", [
    ({"build_timeout": 0.0}, f"build_timeout must be a positive number of seconds, got 0.0; use e.g. {DEFAULT_BUILD_TIMEOUT}"),
    ({"env": {"N": 3}}, "env values must be strings; quote these in YAML: N"),
    ({"cmd": " "}, "flodl prebuild: cmd (flodl_cmd, the cargo --bin target) is required"),
])
def test_unusable_arguments_are_refused_with_the_fix(project, over, words):
    out = build(params(project, [worker("w1")], **over), check_mode=False)
    assert out["failed"] is True and words in out["msg"]


def test_a_target_dir_under_a_link_out_of_the_checkout_is_refused_before_writing(project, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "target").symlink_to(outside)
    out = build(params(project, [worker("w1")]), check_mode=False)
    assert out["failed"] is True and out["msg"].startswith("flodl prebuild: ")
    assert "target" in out["msg"] and list(outside.iterdir()) == []


def test_an_envelope_that_cannot_be_written_fails_after_the_builds(project, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    out = build(params(project, [worker("w1")], envelope_file=str(blocker / "env.json")), check_mode=False)
    assert out["failed"] is True
    assert "every build succeeded but the envelope file could not be written" in out["msg"]


def test_no_remote_worker_hands_over_an_empty_envelope_and_removes_the_old_one(project):
    envelope = project / "target/cluster/prebuild-envelope.json"
    envelope.parent.mkdir(parents=True)
    envelope.write_text('{"old":{}}', encoding="utf-8")
    out = build(params(project, []), check_mode=False)
    assert not out.get("failed") and out["envelope_json"] == "" and out["changed"] is True
    assert not envelope.exists()


def test_under_umask_000_nothing_the_build_writes_is_group_or_world_writable(project, tmp_path):
    """cargo runs under umask 022; what an earlier build left looser is tightened; the binary is 0755."""
    stale = project / "target/cluster/w1/precompiled-cu128/release/deps"
    stale.mkdir(parents=True)
    (stale / "old.rlib").write_text("")
    os.chmod(stale, 0o777)
    os.chmod(stale / "old.rlib", 0o666)
    old = os.umask(0)
    try:
        out = build(params(project, [worker("w1"), worker("w2")]), check_mode=False)
    finally:
        os.umask(old)
    assert not out.get("failed"), out.get("msg")
    log = (project / "target/cluster/w1/precompiled-cu128/prebuild.log").read_text(encoding="utf-8")
    assert "# umask: 022\n" in log and "(umask 0022)" in log
    loose = []
    for directory, dirs, files in os.walk(project / "target"):
        for path in [directory] + [os.path.join(directory, n) for n in dirs + files]:
            if os.lstat(path).st_mode & 0o022:
                loose.append(path)
    assert loose == []
    modes = {rel: stat.S_IMODE(os.lstat(project / rel).st_mode) for rel in (
        "target/cluster/w1/precompiled-cu128/release/train", "target/cluster/w2/precompiled-cu128/release/train",
        "target/cluster/w1/precompiled-cu128/prebuild.log", "target/cluster/prebuild-envelope.json",
        "target/cluster", "target/cluster/w2/precompiled-cu128/release")}
    assert list(modes.values()) == [0o755, 0o755, 0o640, 0o644, 0o755, 0o755], modes


FAKE_DOCKER = """#!/bin/sh
# docker compose run --rm SVC bash -c INNER: INNER runs here, the project standing in for /workspace, under
# umask 000 (a container whose entrypoint loosened it: the umask of the build's shell does not reach it).
for last; do :; done
umask 000
exec bash -c "$(printf '%s' "$last" | sed "s#/workspace#$PWD#g")"
"""


def test_a_docker_build_that_ignores_the_umask_is_tightened_after(project):
    tools = project.parent / "bin"
    (tools / "docker").write_text(FAKE_DOCKER, encoding="utf-8")
    (tools / "docker").chmod(0o755)
    out = build(params(project, [worker("w1"), worker("w2")], docker_service="cuda"), check_mode=False)
    assert not out.get("failed"), out.get("msg")
    assert out["mode"] == "docker"
    log = (project / "target/cluster/w1/precompiled-cu128/prebuild.log").read_text(encoding="utf-8")
    assert "(umask 0000)" in log  # the stand-in container did loosen it
    release = project / "target/cluster/w1/precompiled-cu128/release"
    assert [stat.S_IMODE(os.lstat(p).st_mode) for p in (release, release / "train")] == [0o755, 0o755]
    assert stat.S_IMODE(os.lstat(project / "target/cluster/w2/precompiled-cu128/release/train").st_mode) == 0o755


def test_a_build_failing_on_a_full_disk_says_so(tmp_path):
    """Issue 38: a full build disk showed up only as cargo's `Bus error`; the failure now names the disk."""
    import subprocess

    from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_process import disk_note

    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=False).returncode == 0
    assert mounted, "the unit tests run as root (a tmpfs stands for the full build disk)"
    try:
        (small / "fill").write_bytes(b"\0" * (1024 * 1024 - 8192))
        note = disk_note(str(small))
        assert note.startswith(f"; the file system holding {small} has only 0 MiB free") and "free space" in note
        assert disk_note(str(tmp_path)) == ""  # plenty of room: nothing added
    finally:
        subprocess.run(["umount", str(small)], check=False)
