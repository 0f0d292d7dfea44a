"""Unit tests for the preflight policy (docs/launcher-contract.md §3a step 4, §7a).

The first two sections port every fdl-cli test of ``check_remote_abi`` and
``check_remote_data_path``; the rest cover the probe script, its parser, the
GPU count, per-host verdicts and the aggregated report.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Worker, cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._ssh import ssh as pf_ssh
from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_findings as pf_findings
from ansible_collections.flodl.cluster.plugins.module_utils._probe import preflight_probe as pf_probe
from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_report as pf_report
from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_verdict as pf_verdict
from ansible_collections.flodl.cluster.plugins.module_utils._preflight.preflight_findings import (
    ERROR,
    WARNING,
)
from ansible_collections.flodl.cluster.plugins.module_utils._probe.abi import check_abi
from ansible_collections.flodl.cluster.plugins.module_utils._probe.data_path import check_data_path
from ansible_collections.flodl.cluster.plugins.module_utils._probe.gpu_count import parse_gpu_counts
from ansible_collections.flodl.cluster.plugins.module_utils._probe.pkill import check_pkill
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import NOTE, Ask

GLIBC_BANNER = "ldd (Debian GLIBC 2.36-9+deb12u4) 2.36"


# --------------------------------------------------------------------------
# ported: ABI check
# --------------------------------------------------------------------------


def test_abi_arch_mismatch_is_an_error() -> None:
    f = check_abi("gv", "x86_64", "aarch64", "ldd (GNU libc) 2.31")
    assert f is not None and f.level == ERROR and f.check == "arch"
    assert "arch mismatch" in f.message
    assert "x86_64" in f.message and "aarch64" in f.message and "gv" in f.message


def test_abi_musl_is_an_error_on_matching_arch() -> None:
    f = check_abi("alp", "x86_64", "x86_64", "musl libc (x86_64)\nVersion 1.2.4")
    assert f is not None and f.level == ERROR and f.check == "libc"
    assert "musl" in f.message and "alp" in f.message


def test_abi_matching_arch_glibc_is_ok_with_a_version_note() -> None:
    f = check_abi("w", "x86_64", "x86_64", "ldd (Ubuntu GLIBC 2.35-0ubuntu3.4) 2.35")
    assert f is not None and f.level == NOTE
    assert "2.35" in f.message, "the note quotes the reported banner"


def test_abi_empty_uname_is_indeterminate_not_a_mismatch() -> None:
    f = check_abi("w", "x86_64", "", "")
    assert f is not None and f.level == WARNING
    assert "mismatch" not in f.message


def test_abi_whitespace_uname_is_indeterminate_too() -> None:
    f = check_abi("w", "x86_64", "  \n", GLIBC_BANNER)
    assert f is not None and f.level == WARNING


def test_abi_arch_is_checked_before_musl() -> None:
    f = check_abi("x", "x86_64", "aarch64", "musl libc")
    assert f is not None and f.level == ERROR and "arch mismatch" in f.message


def test_abi_matching_arch_without_ldd_is_clean() -> None:
    assert check_abi("w", "x86_64", "x86_64", "") is None


def test_abi_uname_trailing_newline_is_trimmed() -> None:
    assert check_abi("w", "x86_64", "x86_64\n", "") is None


def test_abi_musl_detection_is_case_insensitive() -> None:
    f = check_abi("w", "x86_64", "x86_64", "MUSL libc")
    assert f is not None and f.level == ERROR


def test_abi_non_glibc_banner_gets_no_note() -> None:
    assert check_abi("w", "x86_64", "x86_64", "ldd: unknown option") is None


def test_abi_i686_against_x86_64_names_both() -> None:
    f = check_abi("h2", "x86_64", "i686", GLIBC_BANNER)
    assert f is not None and f.level == ERROR
    assert "x86_64" in f.message and "i686" in f.message and "Exec format error" in f.message


# --------------------------------------------------------------------------
# ported: data path check
# --------------------------------------------------------------------------


def test_data_path_present_and_readable_is_clean() -> None:
    assert check_data_path("h", "/flodl/data", True, True, True) is None


def test_data_path_missing_declared_is_an_error() -> None:
    f = check_data_path("h", "/mnt/nas", True, False, False)
    assert f is not None and f.level == ERROR
    assert "missing" in f.message and "/mnt/nas" in f.message and "declared" in f.message


def test_data_path_missing_convention_default_is_a_warning() -> None:
    f = check_data_path("h", "/flodl/data", False, False, False)
    assert f is not None and f.level == WARNING
    assert "convention" in f.message


def test_data_path_present_but_unreadable_is_an_error_either_way() -> None:
    for declared in (True, False):
        f = check_data_path("h", "/flodl/data", declared, True, False)
        assert f is not None and f.level == ERROR
        assert "cannot read" in f.message


def test_data_path_messages_name_host_and_fix() -> None:
    f = check_data_path("gpu-b", "/mnt/nas", True, False, False)
    assert f is not None
    assert f.message.startswith("gpu-b:")
    assert "flodl_data_path" in f.message


# --------------------------------------------------------------------------
# the probe script
# --------------------------------------------------------------------------


def test_probe_script_data_path_only_without_prebuild() -> None:
    s = pf_probe.probe_script(Ask(data_path="/flodl/data"))
    assert s.startswith(
        "if [ -d /flodl/data ]; then echo __FLODL_DP_DIR__=1; else echo __FLODL_DP_DIR__=0; fi; "
        "if [ -r /flodl/data ]; then echo __FLODL_DP_READ__=1; else echo __FLODL_DP_READ__=0; fi"
    )
    assert "uname" not in s and "nvidia-smi" not in s
    assert s.endswith("echo __FLODL_END__")


def test_probe_script_abi_section_matches_contract() -> None:
    s = pf_probe.probe_script(Ask(data_path="/d", prebuilt=True))
    assert (
        "echo __FLODL_ABI__; uname -m; echo __FLODL_LDD__; ldd --version 2>&1 | head -1; "
        "echo __FLODL_PKILL__; command -v pkill >/dev/null 2>&1 && echo present || echo absent"
    ) in s


def test_probe_script_gpu_section_is_the_contract_script() -> None:
    s = pf_probe.probe_script(Ask(data_path="/d", gpus=True))
    assert (
        "n=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l); "
        "a=$(grep -l '^vendor_id 4098$' /sys/class/kfd/kfd/topology/nodes/*/properties 2>/dev/null | wc -l); "
        'echo "$n $a"'
    ) in s


def test_probe_script_quotes_the_path() -> None:
    s = pf_probe.probe_script(Ask(data_path="/mnt/my data/it's"))
    assert "[ -d '/mnt/my data/it'\\''s' ]" in s


def test_remote_command_wraps_in_sh() -> None:
    cmd = pf_probe.remote_command("echo 'a b'")
    assert cmd == "sh -c 'echo '\\''a b'\\'''"


def _run_probe(script: str) -> str:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout


def test_probe_script_really_runs_under_sh(tmp_path: Path) -> None:
    data = tmp_path / "data dir"
    data.mkdir()
    out = pf_probe.parse_probe(_run_probe(pf_probe.probe_script(Ask(data_path=str(data), prebuilt=True, gpus=True))))
    assert out.complete and out.dir_ok is True and out.read_ok is True
    assert out.uname and out.pkill in ("present", "absent")
    assert parse_gpu_counts(out.gpus or "") == (0, 0) or out.gpus


def test_probe_script_reports_a_missing_dir(tmp_path: Path) -> None:
    out = pf_probe.parse_probe(_run_probe(pf_probe.probe_script(Ask(data_path=str(tmp_path / "nope")))))
    assert out.complete and out.dir_ok is False and out.read_ok is False
    assert out.uname is None and out.gpus is None


def test_remote_command_runs_through_a_shell(tmp_path: Path) -> None:
    cmd = pf_probe.remote_command(pf_probe.probe_script(Ask(data_path=str(tmp_path), gpus=True)))
    out = pf_probe.parse_probe(_run_probe(cmd))
    assert out.complete and out.dir_ok is True


# --------------------------------------------------------------------------
# the parser
# --------------------------------------------------------------------------

FULL = (
    "__FLODL_DP_DIR__=1\n__FLODL_DP_READ__=1\n__FLODL_ABI__\nx86_64\n__FLODL_LDD__\n"
    f"{GLIBC_BANNER}\n__FLODL_PKILL__\npresent\n__FLODL_GPUS__\n2 0\n__FLODL_END__\n"
)


def test_parse_full_output() -> None:
    out = pf_probe.parse_probe(FULL)
    assert out.complete
    assert (out.dir_ok, out.read_ok) == (True, True)
    assert out.uname == "x86_64" and out.ldd == GLIBC_BANNER and out.pkill == "present"
    assert parse_gpu_counts(out.gpus or "") == (2, 0)


def test_parse_zero_sentinels_are_false() -> None:
    out = pf_probe.parse_probe("__FLODL_DP_DIR__=0\n__FLODL_DP_READ__=0\n__FLODL_END__\n")
    assert (out.dir_ok, out.read_ok) == (False, False)


def test_parse_ignores_noise_and_does_not_match_substrings() -> None:
    text = "welcome banner __FLODL_DP_DIR__=1\n" + FULL.replace("__FLODL_DP_DIR__=1", "__FLODL_DP_DIR__=0")
    out = pf_probe.parse_probe(text)
    assert out.dir_ok is False


def test_parse_missing_end_is_incomplete() -> None:
    out = pf_probe.parse_probe(FULL.replace("__FLODL_END__\n", ""))
    assert not out.complete


def test_parse_empty_sections() -> None:
    out = pf_probe.parse_probe(
        "__FLODL_DP_DIR__=1\n__FLODL_DP_READ__=1\n__FLODL_ABI__\n__FLODL_LDD__\n__FLODL_PKILL__\n__FLODL_END__\n"
    )
    assert out.uname == "" and out.ldd == "" and out.pkill == ""


def test_parse_musl_banner_from_stderr_merge() -> None:
    out = pf_probe.parse_probe(FULL.replace(GLIBC_BANNER, "musl libc (x86_64)"))
    assert out.ldd == "musl libc (x86_64)"


def test_parse_crlf() -> None:
    out = pf_probe.parse_probe(FULL.replace("\n", "\r\n"))
    assert out.complete and out.uname == "x86_64"


# --------------------------------------------------------------------------
# GPU counts
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2 0", (2, 0)), ("0 4\n", (0, 4)), ("junk\n\n1 1\n\n", (1, 1)), ("  3   0  ", (3, 0))],
)
def test_gpu_counts_last_non_empty_line(text: str, expected: tuple[int, int]) -> None:
    assert parse_gpu_counts(text) == expected


@pytest.mark.parametrize("text", ["", "\n\n", "2", "2 0 1", "a b", "-1 0", "2 0\nnot numbers"])
def test_gpu_counts_anything_else_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_gpu_counts(text)


def _worker(host: str = "h1", devices: object = "all", arch: str | None = "precompiled/cu128", **extra: object) -> Worker:
    """The run's typed worker (module_utils._cluster.model), as the sweep hands it to the verdicts."""
    w = {"host": host, "local_devices": devices, "path": "/p", "nccl_socket_ifname": "eth0"}
    if arch:
        w["arch"] = arch
    w.update(extra)
    return cluster_model({"controller": {"host": "c", "path": "/p"}, "workers": [w]}).workers[0]


def test_check_gpus_zero_is_an_error_naming_the_host() -> None:
    gpus, f = pf_findings.check_gpus(_worker("h7"), "0 0")
    assert gpus == {"nvidia": 0, "amd": 0}
    assert f is not None and f.level == ERROR and f.message.startswith("h7:") and "0 GPUs" in f.message


def test_check_gpus_vendor_follows_the_arch() -> None:
    assert pf_findings.check_gpus(_worker(arch="precompiled/cu128"), "2 0")[1] is None
    gpus, f = pf_findings.check_gpus(_worker(arch="precompiled/rocm63"), "2 0")
    assert f is not None, "an AMD variant on an NVIDIA-only host has 0 usable GPUs"
    assert pf_findings.check_gpus(_worker(arch="precompiled/rocm63"), "0 2")[1] is None


def test_check_gpus_both_vendors_without_arch_is_ambiguous() -> None:
    dummy, f = pf_findings.check_gpus(_worker(arch=None), "1 1")
    assert f is not None and "NVIDIA" in f.message


def test_check_gpus_unparseable_is_an_error() -> None:
    gpus, f = pf_findings.check_gpus(_worker("h3"), "nvidia-smi: not found")
    assert gpus is None and f is not None and f.level == ERROR and "h3" in f.message


# --------------------------------------------------------------------------
# pkill
# --------------------------------------------------------------------------


def test_pkill_absent_warns() -> None:
    f = check_pkill("h", "absent")
    assert f is not None and f.level == WARNING and "pkill" in f.message


@pytest.mark.parametrize("answer", ["present", "", None, "garbled"])
def test_pkill_only_explicit_absent_warns(answer: str | None) -> None:
    assert check_pkill("h", answer) is None


# --------------------------------------------------------------------------
# one host's verdict
# --------------------------------------------------------------------------


def _eval(stdout: str = FULL, *, rc: int | None = 0, error: str | None = None, prebuild: bool = True,
          build_arch: str | None = "x86_64", declared: bool = False, worker: Worker | None = None,
          stderr: str = "") -> dict:
    return pf_verdict.evaluate_remote(
        worker or _worker(devices=[0]),
        data_path="/flodl/data",
        declared=declared,
        prebuild=prebuild,
        build_arch=build_arch,
        returncode=rc,
        stdout=stdout,
        stderr=stderr,
        error=error,
    )


def test_healthy_host_is_ok() -> None:
    r = _eval()
    assert r["status"] == "ok"
    assert r["arch"] == "x86_64" and r["libc"] == "glibc 2.36" and r["pkill"] == "present"
    assert r["data_path"] == {"path": "/flodl/data", "declared": False, "state": "ok"}
    assert r["errors"] == [] and r["warnings"] == []
    assert len(r["notes"]) == 1 and "2.36" in r["notes"][0]
    assert r["gpus"] is None


@pytest.mark.parametrize(("answer", "found"), [
    ("0", "is missing (or not a directory)"),
    ("2", "exists but this ssh user cannot enter it"),
])
def test_a_missing_project_path_fails_the_host_naming_path_and_fix(answer: str, found: str) -> None:
    """issue 38: preflight said ok for a worker without its checkout; every rank there would fail to start."""
    worker = _worker(devices=[0], path="/srv/proj")
    r = _eval(FULL.replace("__FLODL_END__", f"__FLODL_PROJECT__={answer}\n__FLODL_END__"), worker=worker)
    assert r["status"] == "error"
    (message,) = r["errors"]
    host = worker.host
    assert message.startswith(f"{host}: the project path /srv/proj (flodl_path) on {host} {found}")
    assert f"check out the project at /srv/proj on {host}" in message and f"set flodl_path for {host}" in message


def test_a_present_project_path_or_no_answer_passes() -> None:
    worker = _worker(devices=[0], path="/srv/proj")
    assert _eval(FULL.replace("__FLODL_END__", "__FLODL_PROJECT__=1\n__FLODL_END__"), worker=worker)["status"] == "ok"
    assert _eval(FULL, worker=worker)["status"] == "ok"


def test_the_project_check_really_runs_under_sh(tmp_path: Path) -> None:
    there = pf_probe.probe_script(Ask(data_path=str(tmp_path), project=str(tmp_path)))
    assert pf_probe.parse_probe(_run_probe(there)).project == "1"
    gone = pf_probe.probe_script(Ask(data_path=str(tmp_path), project=str(tmp_path / "no proj")))
    assert pf_probe.parse_probe(_run_probe(gone)).project == "0"
    (tmp_path / "file").write_text("")
    a_file = pf_probe.probe_script(Ask(data_path=str(tmp_path), project=str(tmp_path / "file")))
    assert pf_probe.parse_probe(_run_probe(a_file)).project == "0"
    assert pf_probe.parse_probe(_run_probe(pf_probe.probe_script(Ask(data_path=str(tmp_path))))).project \
        is None


def test_gpu_counts_are_reported_for_all() -> None:
    r = _eval(worker=_worker(devices="all"))
    assert r["status"] == "ok" and r["gpus"] == {"nvidia": 2, "amd": 0}


def test_unreachable_is_a_warning_never_an_error() -> None:
    r = _eval("", rc=255, stderr="ssh: connect to host 10.0.0.5 port 22: No route to host\n", declared=True)
    assert r["status"] == "unreachable"
    assert r["errors"] == [] and len(r["warnings"]) == 1
    assert "No route to host" in r["warnings"][0]
    assert r["data_path"]["state"] == "unknown"


@pytest.mark.parametrize(("rc", "stderr", "error", "why"), [
    (255, "ssh: connect to host 10.0.0.5 port 22: No route to host\n", None, "No route to host"),
    (None, "", "no answer within 30s", "no answer within 30s"),
    (127, "sh: not found", None, "the probe exited 127"),
])
def test_a_probe_that_could_not_run_is_an_error_when_every_worker_is_required(rc, stderr, error, why) -> None:
    """flodl_preflight_require_all: the worker fails, naming itself, why, and both fixes."""
    r = pf_verdict.evaluate_remote(_worker(devices=[0]), data_path="/flodl/data", declared=False, prebuild=True,
                                   build_arch="x86_64", returncode=rc, stdout="", stderr=stderr, error=error,
                                   require_reached=True)
    assert r["status"] == "error" and r["warnings"] == []
    (message,) = r["errors"]
    assert message.startswith("h1: preflight probe could not run (") and why in message
    assert "flodl_preflight_require_all is true" in message and "make ssh to h1 work" in message
    assert "set flodl_preflight_require_all: false" in message


def test_timeout_and_spawn_failure_are_unreachable() -> None:
    assert _eval("", rc=None, error="no answer within 30s")["status"] == "unreachable"
    assert _eval("", rc=None, error="could not start ssh: ENOENT")["status"] == "unreachable"


def test_probe_exit_code_is_a_warning() -> None:
    r = _eval("", rc=127, stderr="sh: not found")
    assert r["status"] == "warning" and r["errors"] == [] and "127" in r["warnings"][0]


def test_incomplete_output_is_a_warning() -> None:
    r = _eval("__FLODL_DP_DIR__=1\n", rc=0)
    assert r["status"] == "warning" and r["errors"] == []


def test_without_prebuild_abi_is_not_judged() -> None:
    r = _eval(FULL.replace("x86_64\n", "i686\n"), prebuild=False)
    assert r["status"] == "ok" and r["arch"] is None


def test_without_prebuild_data_path_still_judged() -> None:
    r = _eval(FULL.replace("__FLODL_DP_DIR__=1", "__FLODL_DP_DIR__=0"), prebuild=False, declared=True)
    assert r["status"] == "error" and r["data_path"]["state"] == "missing"


def test_arch_mismatch_and_missing_path_both_reported() -> None:
    text = FULL.replace("x86_64\n", "i686\n").replace("__FLODL_DP_DIR__=1", "__FLODL_DP_DIR__=0")
    r = _eval(text, declared=True)
    assert r["status"] == "error" and len(r["errors"]) == 2


def test_unknown_build_arch_still_catches_musl() -> None:
    r = _eval(FULL.replace(GLIBC_BANNER, "musl libc (x86_64)"), build_arch=None)
    assert r["status"] == "error" and "musl" in r["errors"][0]
    r = _eval(build_arch=None)
    assert r["status"] == "ok", "the unknown build arch is warned once, for the build host, not per worker"
    assert r["arch"] == "x86_64"


def test_pkill_absent_makes_a_warning_status() -> None:
    r = _eval(FULL.replace("present", "absent"))
    assert r["status"] == "warning" and r["pkill"] == "absent"


def test_unreadable_is_an_error() -> None:
    r = _eval(FULL.replace("__FLODL_DP_READ__=1", "__FLODL_DP_READ__=0"))
    assert r["status"] == "error" and r["data_path"]["state"] == "unreadable"


def test_controller_report() -> None:
    r = pf_verdict.controller_report("vm", "/flodl/data", False, False, False)
    assert r["status"] == "warning" and r["data_path"]["state"] == "missing"
    assert pf_report.summary_line(r) == "controller vm: warning — local checks, data /flodl/data missing"
    r = pf_verdict.controller_report("vm", "/mnt/x", True, False, False)
    assert r["status"] == "error" and "vm:" in r["errors"][0]


# --------------------------------------------------------------------------
# the whole run
# --------------------------------------------------------------------------


def test_summary_line_shape() -> None:
    r = _eval(worker=_worker(devices="all"))
    assert pf_report.summary_line(r) == "h1: ok — x86_64, glibc 2.36, data /flodl/data ok, gpus 2 nvidia / 0 amd"


def test_summary_line_unreachable() -> None:
    r = _eval("", rc=255)
    assert pf_report.summary_line(r) == "h1: unreachable — data /flodl/data unknown"


def test_libc_label() -> None:
    assert pf_verdict.libc_label(GLIBC_BANNER) == "glibc 2.36"
    assert pf_verdict.libc_label("ldd (GNU libc) 2.31") == "glibc 2.31"
    assert pf_verdict.libc_label("musl libc (x86_64)") == "musl"
    assert pf_verdict.libc_label("") is None and pf_verdict.libc_label(None) is None


def test_failure_message_one_line_per_failing_host_plus_warnings() -> None:
    bad_arch = _eval(FULL.replace("x86_64\n", "i686\n"), worker=_worker("h2", devices=[0]))
    bad_both = _eval(FULL.replace("x86_64\n", "i686\n").replace("__FLODL_DP_DIR__=1", "__FLODL_DP_DIR__=0"),
                     declared=True, worker=_worker("h4", devices=[0]))
    down = _eval("", rc=255, worker=_worker("h5", devices=[0]))
    good = _eval(worker=_worker("h1", devices=[0]))
    reports = [good, bad_arch, bad_both, down]
    totals = pf_report.collect(reports)
    assert totals["failed_hosts"] == ["h2", "h4"]
    msg = pf_report.failure_message(reports, totals["warnings"])
    lines = msg.splitlines()
    assert lines[0].startswith("flodl preflight failed on 2 host(s)")
    assert lines[1].strip().startswith("h2:") and lines[2].strip().startswith("h4:")
    assert "warnings (not fatal):" in msg and "h5:" in msg.split("warnings (not fatal):")[1]
    assert "h1:" not in msg


def test_glibc_advisory_lists_hosts() -> None:
    reports = [_eval(worker=_worker("h1", devices=[0])), _eval("", rc=255, worker=_worker("h2", devices=[0]))]
    adv = pf_report.glibc_advisory(reports)
    assert adv is not None and "glibc 2.36 on h1" in adv and "h2" not in adv
    assert pf_report.glibc_advisory([]) is None


# --------------------------------------------------------------------------
# host keys: a definitive error, never "unreachable"
# --------------------------------------------------------------------------

CHANGED_STDERR = (
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
    "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
    "Host key for [10.0.0.12]:2222 has changed and you have requested strict checking.\n"
    "Host key verification failed.\n"
)
# OpenSSH 9.2 for a key marked @revoked in known_hosts (it said "no host key" before issue 38).
REVOKED_STDERR = (
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
    "@       WARNING: REVOKED HOST KEY DETECTED!               @\n"
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
    "The ED25519 host key for [10.0.0.12]:2222 is marked as revoked.\n"
    "This could mean that a stolen key is being used to\n"
    "impersonate this host.\n"
    "Host key verification failed.\n"
)
UNKNOWN_STDERR = (
    "No ED25519 host key is known for [10.0.0.12]:2222 and you have requested strict checking.\n"
    "Host key verification failed.\n"
)


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        (CHANGED_STDERR, pf_ssh.HOST_KEY_CHANGED),
        (UNKNOWN_STDERR, pf_ssh.HOST_KEY_UNKNOWN),
        (REVOKED_STDERR, pf_ssh.HOST_KEY_REVOKED),
        ("ED25519 host key for 10.0.0.12 was revoked and you have requested strict checking.\n",
         pf_ssh.HOST_KEY_REVOKED),
        ("Host key verification failed.\r\n", pf_ssh.HOST_KEY_UNKNOWN),
        ("ssh: connect to host x port 22: Connection refused\n", None),
        ("Permission denied (publickey).\n", None),
        ("", None),
    ],
)
def test_host_key_failure_is_recognised(stderr: str, kind: str | None) -> None:
    assert pf_ssh.host_key_failure(stderr) == kind


def _keyed_worker(**ssh: object) -> Worker:
    return _worker("gpu-b", devices=[0], ssh={"target": "alice@10.0.0.12", "port": 2222, **ssh})


def test_unknown_host_key_is_an_error_with_the_fixes() -> None:
    r = _eval("", rc=255, stderr=UNKNOWN_STDERR, worker=_keyed_worker())
    assert r["status"] == "error" and r["warnings"] == []
    assert r["errors"] == [
        "gpu-b: ssh host-key verification failed: no host key for 10.0.0.12 is in the controller's known_hosts "
        "and ssh checks strictly. Preflight could not check this host, and flodl's ssh fan-out needs a host it "
        "can authenticate. Fix: record the key with `ssh-keyscan -H -p 2222 10.0.0.12 >> ~/.ssh/known_hosts` "
        "on the controller; under AWX, ship that known_hosts file in the execution environment; or opt in for "
        "this worker alone with `StrictHostKeyChecking=accept-new` in its flodl_ssh.options "
        "(never StrictHostKeyChecking=no)."
    ]


def test_changed_host_key_says_remove_the_old_entry_first() -> None:
    r = _eval("", rc=255, stderr=CHANGED_STDERR, worker=_keyed_worker())
    assert r["status"] == "error"
    (message,) = r["errors"]
    assert "differs from the one in known_hosts" in message
    assert "`ssh-keygen -R '[10.0.0.12]:2222'`" in message
    assert "ssh-keyscan -H -p 2222 10.0.0.12" in message


def test_a_revoked_host_key_is_reported_as_revoked_with_the_rekey_fix() -> None:
    r = _eval("", rc=255, stderr=REVOKED_STDERR, worker=_keyed_worker())
    assert r["status"] == "error"
    (message,) = r["errors"]
    assert message.startswith("gpu-b: ssh host-key verification failed: the host key 10.0.0.12 presented is "
                              "marked @revoked in the controller's known_hosts")
    assert "no host key" not in message and "accept-new cannot help" in message
    assert "`ssh-keygen -A`" in message and "keep the @revoked line" in message
    assert "ssh-keygen -R" not in message  # removing the revocation is not the fix


def test_an_unknown_key_behind_a_jump_may_be_the_jump_hosts() -> None:
    worker = _keyed_worker(options=["ProxyJump=ops@10.0.0.2"])
    (message,) = _eval("", rc=255, stderr="Host key verification failed.\n", worker=worker)["errors"]
    assert "no host key for 10.0.0.12 is in the controller's known_hosts and ssh checks strictly (or, as this " \
        "worker is reached through a jump host, none for that jump host)" in message


def test_host_key_without_port_has_no_port_option() -> None:
    r = _eval("", rc=255, stderr=UNKNOWN_STDERR, worker=_worker("gpu-c", devices=[0]))
    assert "`ssh-keyscan -H gpu-c >> ~/.ssh/known_hosts`" in r["errors"][0]


def test_host_key_text_from_a_remote_command_is_not_a_key_failure() -> None:
    # Only ssh's own exit code 255 counts: a probe printing that text and exiting 1 stays a warning.
    r = _eval("", rc=1, stderr="Host key verification failed.\n")
    assert r["status"] == "warning" and r["errors"] == []


def test_host_key_failure_fails_the_run_in_failure_message() -> None:
    reports = [_eval("", rc=255, stderr=UNKNOWN_STDERR, worker=_keyed_worker())]
    summary = pf_report.collect(reports)
    assert summary["failed_hosts"] == ["gpu-b"]
    assert "ssh-keyscan" in pf_report.failure_message(reports, summary["warnings"])


def test_run_report_collects_every_failing_host_and_prints_the_summary() -> None:
    controller = pf_verdict.controller_report("vm", "/flodl/data", True, True, True)
    good = _eval()
    bad = dict(_eval(), host="h2", status="error", errors=["h2: the declared data path /mnt/gone is missing"],
               probe_command="ssh h2 sh -c probe")
    data, lines = pf_report.run_report(controller, {"h1": good, "h2": bad}, ["h3: could not resolve"], build_arch="x86_64",
                                       check=True, controller_identity="vm", prebuild=True, build_host="localhost")
    assert data["ok"] is False and data["failed_hosts"] == ["h2"]
    assert data["warnings"][0] == "h3: could not resolve"
    assert data["failure"][0] == "flodl preflight failed on 1 host(s); nothing was built or launched:"
    assert lines[0] == "flodl preflight (2 worker(s) of the play, build arch x86_64)"
    # problems first: the failed host leads, then the rest in their order
    assert lines[1].startswith("  h2: error") and lines[2].startswith("  controller vm: ok")
    assert lines[3].startswith("  h1: ok")
    assert data["failure"][1] == "  h2: the declared data path /mnt/gone is missing"
    assert lines[-2:] == ["flodl preflight probes (check mode; the probe only reads):", "  h2: ssh h2 sh -c probe"]


def test_run_report_of_a_clean_run_has_no_failure() -> None:
    controller = pf_verdict.controller_report("vm", "/flodl/data", True, True, True)
    data, lines = pf_report.run_report(controller, {"h1": _eval()}, [], build_arch=None, check=False,
                                       controller_identity="vm", prebuild=False, build_host="localhost")
    assert data["ok"] is True and "failure" not in data and data["failed_hosts"] == []
    assert lines[0] == "flodl preflight (1 worker(s) of the play)"
    assert not any("check mode" in line for line in lines)


def test_run_report_of_a_large_cluster_folds_its_healthy_hosts_without_v() -> None:
    controller = pf_verdict.controller_report("vm", "/flodl/data", True, True, True)
    reports = {f"h{i}": dict(_eval(), host=f"h{i}") for i in range(60)}
    reports["h9"] = dict(_eval(), host="h9", status="error", errors=["h9: the declared data path /mnt/gone is missing"])
    data, lines = pf_report.run_report(controller, reports, [], build_arch=None, check=False, controller_identity="vm",
                                       prebuild=False, build_host="localhost", verbose=False)
    assert len(data["summary"]) == 61  # the result keeps every host's line
    assert lines[1].startswith("  h9: error") and lines[2].startswith("  controller vm: ok")
    folded = [ln for ln in lines if "(59 workers): h0, h1, h2" in ln]
    assert len(folded) == 1 and len(lines) <= 6, lines
    _data, verbose_lines = pf_report.run_report(controller, reports, [], build_arch=None, check=False,
                                                controller_identity="vm", prebuild=False, build_host="localhost", verbose=True)
    assert sum(ln.startswith("  h") for ln in verbose_lines) == 60


def test_a_probe_parsed_by_the_caller_is_the_one_judged() -> None:
    """The sweep parses a worker's output once (its live count serves a launch that follows) and hands it over."""
    worker = _worker(devices=[0])
    whole = pf_verdict.evaluate_remote(worker, data_path="/flodl/data", declared=False, prebuild=True,
                                       build_arch="x86_64", returncode=0, stdout=FULL)
    handed = pf_verdict.evaluate_remote(worker, data_path="/flodl/data", declared=False, prebuild=True,
                                        build_arch="x86_64", returncode=0, stdout="", probe=pf_probe.parse_probe(FULL))
    assert handed == whole and handed["status"] == "ok" and handed["arch"] == "x86_64"
