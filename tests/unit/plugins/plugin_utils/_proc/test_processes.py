"""plugin_utils._proc.processes.run_parallel: one deadline for the whole sweep, however many hosts (real processes)."""
from __future__ import annotations

import resource
import time

from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import (
    parallel_cap,
    probe_bounds,
    run_parallel,
    run_probes,
)


def test_two_hundred_hanging_hosts_cost_one_timeout_not_one_per_round_of_64():
    jobs = {f"h{i}": ["sleep", "30"] for i in range(200)}
    start = time.monotonic()
    results = run_parallel(jobs, timeout=3.0)
    elapsed = time.monotonic() - start
    # Rounds of 64 would take 4 x 3 s; one deadline takes 3 s plus the cost of starting 200 processes.
    assert elapsed < 9.0, elapsed
    assert sorted(results) == sorted(jobs)
    errors = [r.error for r in results.values()]
    # On a loaded machine a few threads may only get to start after the deadline: reported, not waited for.
    late = "not reached: the sweep of 200 hosts (200 at once) used its whole 3s"
    assert set(errors) <= {"no answer within 3s", late} and errors.count("no answer within 3s") > 100


def test_a_cap_still_ends_the_sweep_at_its_deadline_and_names_the_hosts_not_reached():
    jobs = {f"h{i:02d}": ["sleep", "30"] for i in range(12)}
    start = time.monotonic()
    results = run_parallel(jobs, timeout=1.0, max_parallel=4)
    elapsed = time.monotonic() - start
    assert elapsed < 3.0, elapsed  # 3 rounds of 1 s without the one deadline
    errors = [r.error or "" for r in results.values()]
    assert sum(e == "no answer within 1s" for e in errors) == 4
    late = [e for e in errors if e.startswith("not reached")]
    assert len(late) == 8 and late[0] == "not reached: the sweep of 12 hosts (4 at once) used its whole 1s"


def test_quick_hosts_queued_behind_a_cap_still_get_the_time_left():
    jobs = {f"h{i}": ["sh", "-c", "sleep 0.2; echo ok"] for i in range(6)}
    results = run_parallel(jobs, timeout=5.0, max_parallel=2)
    assert all(r.ok and r.stdout == "ok\n" for r in results.values())


def test_the_cap_follows_the_open_files_limit():
    assert parallel_cap(200, 1024) == 200
    assert parallel_cap(1000, 1024) == (1024 - 128) // 3
    assert parallel_cap(1000, 100) == 16  # never starved below 16
    assert parallel_cap(3, 1 << 20) == 3
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft > 0


# --------------------------------------------------------------------------- preflight's probes (run_probes)


def test_probes_in_flight_follow_the_controllers_cpus_and_the_deadline_the_rounds():
    # 128 probes on 2 CPUs: 32 at once, 4 rounds, so 4 timeouts for the sweep; each probe still gets 30 s.
    assert probe_bounds(128, 30.0, cpus=2, limit=1 << 20, max_parallel=64) == (32, 120.0)
    # A bigger controller: the operator's cap (the default 64) holds; 32 workers on 2 CPUs: one round.
    assert probe_bounds(128, 30.0, cpus=16, limit=1 << 20, max_parallel=64) == (64, 60.0)
    assert probe_bounds(32, 30.0, cpus=2, limit=1 << 20, max_parallel=64) == (32, 30.0)
    assert probe_bounds(5, 30.0, cpus=1, limit=1 << 20, max_parallel=None) == (5, 30.0)
    # The open-files limit still caps it.
    assert probe_bounds(1000, 10.0, cpus=64, limit=1024, max_parallel=None) == (298, 40.0)


def test_a_probe_queued_behind_the_cap_gets_its_whole_timeout_from_its_own_start():
    # Before: one 1.5 s deadline for the sweep, so the second round had ~0.3 s left and failed. Now each
    # probe gets 1.5 s from its start, in a sweep bounded by 2 rounds.
    jobs = {f"h{i}": ["sh", "-c", "sleep 1.2; echo ok"] for i in range(4)}
    start = time.monotonic()
    results = run_probes(jobs, timeout=1.5, cpus=1, max_parallel=2)
    assert all(r.ok and r.stdout == "ok\n" for r in results.values()), results
    assert time.monotonic() - start < 3.0 + 1.0


def test_silent_hosts_still_end_in_bounded_time():
    jobs = {f"h{i}": ["sleep", "30"] for i in range(6)}
    start = time.monotonic()
    results = run_probes(jobs, timeout=1.0, cpus=1, max_parallel=3)  # 2 rounds
    elapsed = time.monotonic() - start
    assert elapsed < 2.0 + 1.0, elapsed  # the rounds, and one more at most
    assert {r.error for r in results.values()} == {"no answer within 1s"}
