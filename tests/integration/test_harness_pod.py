"""The job-pod harness (tests/harness/pod.py) itself: reach one way, hidden mount, whole-tree kill."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from pod import Pod

# In the pod: who am I, is the shared path there, can I reach h1's sshd, then listen on 9999
# (proved open from inside the pod) and leave a setsid'd and a plain sleeper behind.
JOB = r"""
hostname
test -e "$1" && echo shared-visible || echo shared-hidden
exec 3<>/dev/tcp/"$2"/22 && head -c 7 <&3 && echo
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 9999)); s.listen()
socket.create_connection((sys.argv[1], 9999), timeout=2).close()
print("listening", flush=True); time.sleep(300)' "$3" &
setsid sleep 300 &
sleep 300
"""


def test_pod_reaches_workers_one_way_hides_the_share_and_dies_whole(cluster3, netns_shared_dir: Path) -> None:
    marker = netns_shared_dir / "marker"
    marker.write_text("x")
    h1 = cluster3.host("h1")
    with Pod(cluster3, hide=[str(netns_shared_dir)]) as pod:
        proc = pod.spawn(["bash", "-c", JOB, "job", str(marker), h1.ip, pod.ip],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = [proc.stdout.readline().strip() for dummy in range(4)]
        assert lines == ["pod", "shared-hidden", "SSH-2.0", "listening"], lines
        assert marker.exists()  # hidden in the pod only
        # h1 (and this machine) cannot open a connection to the pod; the listener is there (proved above)
        back = cluster3.ssh(h1, f"timeout 2 bash -c 'exec 3<>/dev/tcp/{pod.ip}/9999' && echo open || echo closed")
        assert back.stdout.strip() == "closed", back.stdout + back.stderr
        pids = pod.pids()
        assert len(pids) >= 4, pids  # init, the job (bash or its last sleep), python, setsid sleep
        assert pod.main_pid() in pids
        start = time.monotonic()
        pod.kill()
        assert pod.pids() == []
        assert all(not Path(f"/proc/{p}").exists() or "zombie" in Path(f"/proc/{p}/status").read_text().lower()
                   for p in pids)
        assert time.monotonic() - start < 2
        assert proc.returncode is not None
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert pod.netns not in netns


def test_pod_forwards_sigterm_to_its_job_and_returns_its_exit_code(cluster3) -> None:
    with Pod(cluster3) as pod:
        proc = pod.spawn(["sh", "-c", "trap 'echo got-term; exit 7' TERM; echo up; sleep 300 & wait"],
                         stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "up"
        pod.terminate()
        assert proc.wait(timeout=10) == 7
        assert "got-term" in proc.stdout.read()
        deadline = time.monotonic() + 5
        while pod.pids() and time.monotonic() < deadline:  # the init's exit ends the rest (the sleep)
            time.sleep(0.01)
        assert pod.pids() == []
