"""An ansible-runner private data dir laid out as AWX lays out a job of examples/awx's ``train.yml``."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from conftest import REPO_ROOT


def job_dir(pdd: Path, collection, local_temp: Path) -> Path:
    """``pdd`` with ``project/train.yml`` and ``env/envvars``; the caller writes the inventory and the survey.

    The environment: the installed collection only, no host-key checking (the harness hosts get new keys on
    every start; AWX itself checks strictly, docs/awx.md §2), and this interpreter's venv first on PATH
    (ansible-runner starts ``ansible-playbook`` from PATH).
    """
    (pdd / "project").mkdir(parents=True)
    (pdd / "env").mkdir()
    shutil.copy(REPO_ROOT / "examples" / "awx" / "project" / "train.yml", pdd / "project" / "train.yml")
    envvars = {
        "ANSIBLE_COLLECTIONS_PATH": str(collection.collections_path),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
        "ANSIBLE_HOST_KEY_CHECKING": "false",
        "ANSIBLE_LOCAL_TEMP": str(local_temp),
        "ANSIBLE_REMOTE_TEMP": "/tmp/.ansible-remote",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        "ANSIBLE_NOCOLOR": "1",
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    (pdd / "env" / "envvars").write_text(json.dumps(envvars, indent=1))
    return pdd
