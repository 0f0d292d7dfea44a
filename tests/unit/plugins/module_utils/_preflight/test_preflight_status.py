"""A report's status follows the messages added to it after its own checks (the build host's, the launch host's)."""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_verdict as pf_verdict
from ansible_collections.flodl.cluster.plugins.module_utils._probe import preflight_probe as pf_probe
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import ERROR, NOTE, WARNING, Finding


def _controller(is_dir: bool = True, declared: bool = True) -> dict:
    return pf_verdict.controller_report("ctl", "/flodl/data", declared, is_dir, True)


def test_a_build_host_warning_makes_an_ok_controller_a_warning() -> None:
    report = _controller()
    assert report["status"] == pf_verdict.STATUS_OK
    pf_verdict.add_findings(report, [Finding(WARNING, "free_space", "build host b: df printed no number")])
    assert report["status"] == pf_verdict.STATUS_WARNING
    assert report["warnings"] == ["build host b: df printed no number"]


def test_a_build_host_error_fails_the_controller() -> None:
    report = _controller()
    pf_verdict.add_findings(report, [Finding(WARNING, "free_space", "w"), Finding(ERROR, "free_space", "e")])
    assert report["status"] == pf_verdict.STATUS_ERROR
    assert report["errors"] == ["e"] and report["warnings"] == ["w"]


def test_a_note_leaves_the_status_and_a_warning_never_lowers_an_error() -> None:
    report = _controller()
    pf_verdict.add_findings(report, [Finding(NOTE, "libc", "n")])
    assert report["status"] == pf_verdict.STATUS_OK and report["notes"] == ["n"]
    failed = _controller(is_dir=False)  # a declared data path that is missing
    assert failed["status"] == pf_verdict.STATUS_ERROR
    pf_verdict.add_findings(failed, [Finding(WARNING, "free_space", "w")])
    assert failed["status"] == pf_verdict.STATUS_ERROR


def test_no_findings_change_nothing() -> None:
    report = _controller(is_dir=False, declared=False)  # the convention path missing: its own warning
    assert report["status"] == pf_verdict.STATUS_WARNING
    pf_verdict.add_findings(report, [])
    assert report["status"] == pf_verdict.STATUS_WARNING


def test_restatus_after_merged_launch_host_messages() -> None:
    report = _controller()
    report["warnings"] = ["launch host lh: its GPU count printed nothing", *report["warnings"]]
    pf_probe.restatus(report)
    assert report["status"] == pf_verdict.STATUS_WARNING
    report["errors"] = ["launch host lh: no data path"]
    pf_probe.restatus(report)
    assert report["status"] == pf_verdict.STATUS_ERROR
